"""Packet capture: every link packet each face sends and receives, into a pcapng file.

The file format is :mod:`icn.wire.pcapng`'s: an interface per face (numbered once for the
whole capture), PPP 0x0077 frames, the direction in each packet's flags.

Per packet, the forwarder only builds the block's head and tail (two ``struct`` calls) and
appends them with the packet itself to a list: a tap spliced into each face
(:meth:`~forwarder.face.face.Face.set_tap`; a forwarder without a capture pays nothing).  Every
``FLUSH_BYTES`` or ``FLUSH_EVERY`` seconds the list goes to a writer thread, which hands it to
the kernel with ``os.writev`` (no copy in Python; the thread holds no lock while the kernel
writes, so the disk never stalls the packet path).  Encoding in a buffer in the forwarder cost
it a quarter of its throughput, and a writer process with its pickling and pipe a fifth
(bench/fwd_throughput.py --pcap); this costs it the list appends.

Bounded: before a batch that would take the file past ``max_bytes``, the file is closed and
rotated (FILE -> FILE.1 -> ... ``files`` files in all; the oldest goes), and the new one starts
with its section header and every face's interface block, so no packet is lost to the cap and
each file reads alone.  Batches waiting for the writer are bounded (``MAX_PENDING`` bytes); one
that finds no room, and one whose write fails (a full disk), is dropped and counted as
``capture.not_written``.  ``capture.packets`` counts what the taps saw, ``capture.bytes`` and
``capture.rotations`` what was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import struct
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from icn.wire.pcapng import (
    EPB,
    EPB_HEAD,
    EPB_OVERHEAD,
    EPB_TAILS,
    PPP_NDN,
    interface_description,
    section_header,
)

if TYPE_CHECKING:
    from forwarder.config import CaptureConfig
    from forwarder.face.face import Face, PacketHook
    from forwarder.face.face_table import FaceTable

log = logging.getLogger(__name__)

FLUSH_BYTES = 1 << 20  # a batch this large goes to the writer at once
FLUSH_EVERY = 0.1  # seconds: how far a live `icn pcap` or `tshark -r` lags behind at most
MAX_PENDING = 64 * 1024 * 1024  # bytes waiting for the writer before batches are dropped
IOV_MAX = 1024  # buffers per writev (Linux's limit)
CLOSE_TIMEOUT = 30.0  # seconds the writer may take to finish the file when the daemon stops

# a block's tail: padding, the direction option, the end of options, and its length again,
# one struct per padding (0-3 bytes) and direction: one call per packet
_TAIL = tuple(struct.Struct(f"<{i % 4}x12sI") for i in range(4))
_FLAGS = (EPB_TAILS[0], EPB_TAILS[4])  # (out, in): the options without padding

Batch = tuple[list[bytes], list[bytes], int, int]  # new interface blocks, parts, bytes, packets


class _Writer(threading.Thread):
    """Writes batches to the file and rotates it; the only thread that touches the file."""

    def __init__(self, path: str, max_bytes: int, files: int) -> None:
        super().__init__(name="icn-capture", daemon=True)
        self.path = path
        self.max_bytes = max_bytes
        self.files = files
        self.batches: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()
        self.interfaces: list[bytes] = []  # every face's block, in interface order
        self.header = section_header()
        # totals, written by this thread only (the daemon copies them into its counters)
        self.done_bytes = 0  # of batches taken, written or not: what is no longer pending
        self.written_bytes = 0
        self.not_written = 0
        self.rotations = 0
        self.error: OSError | None = None
        self.fd: int | None = None
        self.size = 0
        self.packets_in_file = 0
        self._open()  # in the caller's thread: a bad path is the daemon's config error

    def _open(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self.packets_in_file = 0
        self._write([self.header, *self.interfaces])

    def _write(self, parts: list[bytes]) -> None:
        if self.fd is None:
            raise OSError("the capture file could not be opened again after rotating")
        for i in range(0, len(parts), IOV_MAX):
            chunk = parts[i : i + IOV_MAX]
            want = sum(map(len, chunk))
            n = os.writev(self.fd, chunk)
            if n < want:  # rare on a file (a signal, a nearly full disk): the rest at once
                rest = b"".join(chunk)[n:]
                while rest:
                    rest = rest[os.write(self.fd, rest) :]
            self.size += want

    def _rotate(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)
        if self.files == 1:
            os.unlink(self.path)
        else:
            for i in range(self.files - 1, 0, -1):
                older = f"{self.path}.{i - 1}" if i > 1 else self.path
                if os.path.exists(older):
                    os.replace(older, f"{self.path}.{i}")
        self.rotations += 1
        self._open()

    def run(self) -> None:
        while (batch := self.batches.get()) is not None:
            new_faces, parts, nbytes, packets = batch
            self.interfaces.extend(new_faces)
            try:
                grows = nbytes + sum(map(len, new_faces))
                if self.size + grows > self.max_bytes and self.packets_in_file:
                    self._rotate()  # the new file has every face's block, these included
                    new_faces = []
                self._write([*new_faces, *parts])
                self.written_bytes += grows
                self.packets_in_file += packets
            except OSError as exc:
                self.not_written += packets
                if self.error is None:
                    self.error = exc
                    log.error("capture %s: %s; packets are counted as not written", self.path, exc)
            self.done_bytes += nbytes

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class PacketCapture:
    """The taps of one forwarder's faces and the writer thread they feed."""

    def __init__(self, path: str, max_bytes: int, files: int, counters: Counter[str]) -> None:
        self.path = path
        self.counters = counters
        self._writer = _Writer(path, max_bytes, files)
        self._writer.start()
        self._parts: list[bytes] = []  # the hooks append here; flush() takes the lot
        self._size = [0]  # bytes in _parts (a list: the hooks add to it in place)
        self._new_faces: list[bytes] = []
        self._faces = 0
        # a batch is handed over at this size, and a file never passes its cap by more
        self._flush_at = min(FLUSH_BYTES, max(16 * 1024, max_bytes // 8))
        self._sent_bytes = 0
        self._dropped = 0  # packets of batches that found no room
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    # ---- taps ------------------------------------------------------------------------------

    def attach(self, faces: FaceTable) -> None:
        """Capture every face ``faces`` holds now and every face it gets later."""
        faces.tap = self.hooks
        for face in faces:
            face.set_tap(self.hooks)
        with contextlib.suppress(RuntimeError):  # without a loop (tests): flush() by hand
            self._loop = asyncio.get_running_loop()
            self._timer = self._loop.call_later(FLUSH_EVERY, self._tick)

    def hooks(self, face: Face) -> tuple[PacketHook, PacketHook]:
        """The receive and send hooks of ``face``: each appends its packet's block."""
        index = self._faces
        self._faces += 1
        desc = f"face {face.face_id} local={face.local_uri}"
        self._new_faces.append(interface_description(face.remote_uri, desc))
        append = self._parts.append
        size = self._size
        flush_at = self._flush_at
        flush = self.flush
        now = time.time_ns
        head = EPB_HEAD.pack
        tails = tuple(t.pack for t in _TAIL)
        flags_out, flags_in = _FLAGS

        def received(wire: bytes) -> None:
            n = len(wire)
            pad = -(n + 2) & 3
            total = EPB_OVERHEAD + n + pad
            us = now() // 1000
            append(head(EPB, total, index, us >> 32, us & 0xFFFFFFFF, n + 2, n + 2, PPP_NDN))
            append(wire)
            append(tails[pad](flags_in, total))
            size[0] += total
            if size[0] >= flush_at:
                flush()

        def sent(wire: bytes) -> None:
            n = len(wire)
            pad = -(n + 2) & 3
            total = EPB_OVERHEAD + n + pad
            us = now() // 1000
            append(head(EPB, total, index, us >> 32, us & 0xFFFFFFFF, n + 2, n + 2, PPP_NDN))
            append(wire)
            append(tails[pad](flags_out, total))
            size[0] += total
            if size[0] >= flush_at:
                flush()

        return received, sent

    # ---- hand-over -------------------------------------------------------------------------

    def flush(self) -> None:
        """Hand the blocks taken so far to the writer (or count them, if it has no room)."""
        parts = self._parts
        if not parts and not self._new_faces:
            return
        batch = parts[:]
        parts.clear()  # the same list: the hooks hold its append
        nbytes, self._size[0] = self._size[0], 0
        packets = len(batch) // 3
        self.counters["capture.packets"] += packets
        new_faces, self._new_faces = self._new_faces, []
        pending = self._sent_bytes - self._writer.done_bytes
        if self._closed:
            self._dropped += packets
        elif pending + nbytes > MAX_PENDING:  # the writer is behind: drop, and count
            self._dropped += packets
            self._writer.batches.put((new_faces, [], 0, 0))  # the faces' blocks still go
        else:
            self._writer.batches.put((new_faces, batch, nbytes, packets))
            self._sent_bytes += nbytes
        self._sync()

    def _sync(self) -> None:
        w = self._writer
        c = self.counters
        c["capture.bytes"] = w.written_bytes
        c["capture.rotations"] = w.rotations
        c["capture.not_written"] = w.not_written + self._dropped

    def _tick(self) -> None:
        self.flush()
        self._sync()
        if self._loop is not None and not self._closed:
            self._timer = self._loop.call_later(FLUSH_EVERY, self._tick)

    def close(self) -> None:
        """Hand over what is left, let the writer finish the file, and wait for it (bounded);
        packets tapped later are counted, not written."""
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self.flush()
        self._closed = True
        self._writer.batches.put(None)
        self._writer.join(CLOSE_TIMEOUT)
        if self._writer.is_alive():
            log.error("capture %s: the writer did not finish in %g s", self.path, CLOSE_TIMEOUT)
        else:
            self._writer.close()
        self._sync()


def open_capture(cfg: CaptureConfig, counters: Counter[str]) -> PacketCapture:
    """The capture ``cfg`` asks for (``cfg.file`` set); OSError if the file cannot be made."""
    assert cfg.file is not None
    return PacketCapture(cfg.file, cfg.max_bytes, cfg.files, counters)
