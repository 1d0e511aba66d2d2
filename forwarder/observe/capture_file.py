"""A capture file and its rotations, written from batches of captured packets.

Runs in the capture's writer process (:mod:`forwarder.observe.capture_writer`), never in the
forwarder: encoding a block per packet costs about a microsecond and a half of Python, which
the forwarder would pay on its own packet path (measured: a quarter of its throughput).

Bounded: before a packet that would take the file past ``max_bytes``, the file is closed and
rotated (FILE -> FILE.1 -> ... up to ``files`` files in all; the oldest goes), and the new file
starts with its own section header and describes each face again when it first appears there,
so that no packet is lost to the cap.  A write that fails (disk full, the directory removed)
counts the packets as not written, and the capture goes on with the next batch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from icn.wire.pcapng import (
    EPB,
    EPB_HEAD,
    EPB_OVERHEAD,
    EPB_TAILS,
    PPP_NDN,
    U32,
    interface_description,
    section_header,
)

# one captured packet: face id, inbound, time in ns since the epoch, the link packet
Record = tuple[int, bool, int, bytes]
# one face: id, remote URI, local URI
FaceRecord = tuple[int, str, str]


@dataclass
class Totals:
    """What the file has taken so far."""

    written: int = 0  # packets
    not_written: int = 0  # packets lost to write errors
    bytes: int = 0
    rotations: int = 0


class CaptureFile:
    """pcapng file ``path`` with its rotations; :meth:`write` takes a batch of records."""

    def __init__(self, path: str, max_bytes: int, files: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.files = files
        self.totals = Totals()
        self.faces: dict[int, tuple[str, str]] = {}
        self.error: OSError | None = None  # the first write error, for the log
        self._interfaces: dict[int, int] = {}  # face id -> interface index in this file
        self._header = section_header()
        self._fd: int | None = None
        self._size = 0
        # a packet block fits while the file stays this far below the cap (an interface
        # block, up to 512 bytes, may come with it)
        self._room = max_bytes - 512
        self._open()

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._interfaces = {}
        self._write_now(self._header)
        self._size = len(self._header)

    def _write_now(self, data: bytes | bytearray) -> None:
        if self._fd is None:
            raise OSError("the capture file could not be opened again after rotating")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def _rotate(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if self.files == 1:
            os.unlink(self.path)
        else:
            for i in range(self.files - 1, 0, -1):
                older = f"{self.path}.{i - 1}" if i > 1 else self.path
                if os.path.exists(older):
                    os.replace(older, f"{self.path}.{i}")
        self.totals.rotations += 1
        self._open()

    def write(self, faces: list[FaceRecord], records: list[Record]) -> None:
        """Append ``records`` (faces first named in ``faces``), rotating where the cap says."""
        for face_id, remote, local in faces:
            self.faces[face_id] = (remote, local)
        parts: list[bytes] = []
        used = self._size
        count = 0
        interfaces = self._interfaces
        head, tails, u32 = EPB_HEAD.pack, EPB_TAILS, U32.pack
        for face_id, inbound, ns, wire in records:
            n = len(wire)
            pad = -(n + 2) & 3
            total = EPB_OVERHEAD + n + pad
            index = interfaces.get(face_id)
            if index is None or used + total > self._room:
                index = self._make_room(face_id, total, parts, count, used)
                if index < 0:  # rotated: the batch so far is written, a new file begun
                    parts, count = [], 0
                    interfaces = self._interfaces
                    index = self._interface(face_id, parts)
                used = self._size + sum(map(len, parts))
            micros = ns // 1000
            parts.append(
                head(EPB, total, index, micros >> 32, micros & 0xFFFFFFFF, n + 2, n + 2, PPP_NDN)
            )
            parts.append(wire)
            parts.append(tails[pad + 4 * inbound])
            parts.append(u32(total))
            used += total
            count += 1
        self._flush(b"".join(parts), count)

    def _make_room(
        self, face_id: int, total: int, parts: list[bytes], count: int, used: int
    ) -> int:
        """Before a packet that needs an interface block or would pass the cap: -1 when the
        file was rotated (``parts`` written first), else the face's interface index (its
        block added to ``parts`` if it had none in this file)."""
        if used + total + 512 > self.max_bytes and used > len(self._header):
            self._flush(b"".join(parts), count)
            try:
                self._rotate()
            except OSError as exc:
                self._failed(exc)
            return -1
        index = self._interfaces.get(face_id)
        return self._interface(face_id, parts) if index is None else index

    def _interface(self, face_id: int, parts: list[bytes]) -> int:
        index = self._interfaces.get(face_id)
        if index is None:
            index = self._interfaces[face_id] = len(self._interfaces)
            remote, local = self.faces.get(face_id, ("face?", ""))
            parts.append(interface_description(remote, f"face {face_id} local={local}"))
        return index

    def _flush(self, out: bytes, count: int) -> None:
        if not out:
            return
        try:
            self._write_now(out)
        except OSError as exc:
            self.totals.not_written += count
            self._failed(exc)
            return
        self._size += len(out)
        self.totals.written += count
        self.totals.bytes += len(out)

    def _failed(self, exc: OSError) -> None:
        if self.error is None:
            self.error = exc

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
