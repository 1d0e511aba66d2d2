"""Packet capture: every link packet each face sends and receives, into a pcapng file.

The file format is :mod:`icn.wire.pcapng`'s (an interface per face, PPP 0x0077, direction
flags).  The capture taps faces (:meth:`~forwarder.face.face.Face.set_tap`), so a forwarder
without one pays nothing; with one, each packet costs a block built in memory.  Blocks are
written in large chunks (every ``FLUSH_BYTES`` or ``FLUSH_EVERY`` seconds, and on close), one
``os.write`` each, so a capture does not add a system call per packet.

Bounded: a file that passes ``max_bytes`` is closed and rotated (FILE -> FILE.1 -> ... up to
``files`` files in all; the oldest goes), and the next file starts with its own section header
and describes each face again when it first appears there.  A write that fails (disk full, the
file removed from under us) drops what was buffered, counts it as ``capture.not_written``, logs
once, and the daemon forwards on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from typing import TYPE_CHECKING

from icn.wire.pcapng import enhanced_packet, interface_description, section_header

if TYPE_CHECKING:
    from forwarder.config import CaptureConfig
    from forwarder.face.face import Face
    from forwarder.face.face_table import FaceTable

log = logging.getLogger(__name__)

FLUSH_BYTES = 1 << 20
FLUSH_EVERY = 0.2  # seconds: what a live `tshark -r` or `icn pcap` lags behind at most


class PacketCapture:
    """One capture file (and its rotations) for the faces of one forwarder."""

    def __init__(self, path: str, max_bytes: int, files: int, counters: Counter[str]) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.files = files
        self.counters = counters
        self._buffer: list[bytes] = []
        self._buffered = 0  # bytes in _buffer
        self._pending = 0  # packets in _buffer
        self._written = 0  # bytes in the current file
        self._interfaces: dict[int, int] = {}  # face id -> interface index in the current file
        self._fd: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._warned = False
        self._closed = False
        self._header_len = len(section_header())
        self._open()

    # ---- files -----------------------------------------------------------------------------

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._interfaces = {}
        header = section_header()
        os.write(self._fd, header)
        self._written = len(header)

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
        self.counters["capture.rotations"] += 1
        self._open()

    # ---- packets ---------------------------------------------------------------------------

    def attach(self, faces: FaceTable) -> None:
        """Capture every face ``faces`` holds now and every face it gets later."""
        faces.tap = self.packet
        for face in faces:
            face.set_tap(self.packet)
        self._schedule()

    def packet(self, face: Face, inbound: bool, wire: bytes) -> None:
        """The tap: one link packet ``face`` received (``inbound``) or sent."""
        if self._closed:
            self.counters["capture.not_written"] += 1
            return
        # rotate before the packet that would pass the cap, so that no packet is lost to it and
        # every interface block sits in the file whose numbering it gives (~100 B of headers)
        in_file = self._written + self._buffered
        if in_file + len(wire) + 128 > self.max_bytes and in_file > self._header_len:
            self.flush()
            self._rotate_safely()
        face_id = face.face_id
        index = self._interfaces.get(face_id)
        if index is None:
            index = self._interfaces[face_id] = len(self._interfaces)
            desc = f"face {face_id} local={face.local_uri}"
            self._add(interface_description(face.remote_uri, desc), 0)
        self._add(enhanced_packet(index, int(time.time() * 1e6), inbound, wire), 1)
        self.counters["capture.packets"] += 1
        if self._buffered >= FLUSH_BYTES:
            self.flush()

    def _add(self, block: bytes, packets: int) -> None:
        self._buffer.append(block)
        self._buffered += len(block)
        self._pending += packets

    def _rotate_safely(self) -> None:
        try:
            self._rotate()
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        if not self._warned:
            self._warned = True
            log.error("capture %s: %s; packets are counted as not written", self.path, exc)

    def flush(self) -> None:
        """Write what is buffered, in one system call (or a few, if the kernel takes part)."""
        if not self._buffer:
            return
        data = b"".join(self._buffer)
        packets = self._pending
        self._buffer, self._buffered, self._pending = [], 0, 0
        try:
            if self._fd is None:
                raise OSError("the capture file could not be opened again after rotating")
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self._written += len(data)
            self.counters["capture.bytes"] += len(data)
        except OSError as exc:
            self.counters["capture.not_written"] += packets
            self._failed(exc)

    def _schedule(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # used without a loop (tests): flush() and close() write
        self._timer = loop.call_later(FLUSH_EVERY, self._tick)

    def _tick(self) -> None:
        self.flush()
        self._schedule()

    def close(self) -> None:
        """Write what is left and close the file; later packets are counted, not written."""
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def open_capture(cfg: CaptureConfig, counters: Counter[str]) -> PacketCapture:
    """The capture ``cfg`` asks for (``cfg.file`` set); OSError if the file cannot be made."""
    assert cfg.file is not None
    return PacketCapture(cfg.file, cfg.max_bytes, cfg.files, counters)
