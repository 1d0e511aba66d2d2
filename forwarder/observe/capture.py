"""Packet capture: every link packet each face sends and receives, into a pcapng file.

The file format is :mod:`icn.wire.pcapng`'s: an interface per face (numbered once for the
whole capture), PPP 0x0077 frames, the direction in each packet's flags.

The capture splices itself into each face's receive and send callbacks
(:meth:`~forwarder.face.face.Face.set_tap`; a forwarder without a capture pays nothing).  The
per-packet part is compiled (``forwarder/observe/_tap.c``): each tap appends the packet's
whole Enhanced Packet Block (nanosecond time, interface, direction) to one buffer and calls
the face's callback.  Every ``FLUSH_BYTES`` or ``FLUSH_EVERY`` seconds the buffer goes to the
file in one write from the loop's own thread.  What it was measured against
(bench/fwd_throughput.py --pcap, capture on / off): the same taps in Python (a ``struct`` call
per packet into a list) cost 8-21 % of the throughput; a writer process fed by a pipe, a
fifth; a writer thread, two fifths (the thread and the event loop taking the GIL from each
other at every batch).

Bounded: before a batch that would take the file past ``max_bytes``, the file is closed and
rotated (FILE -> FILE.1 -> ... ``files`` files in all; the oldest goes), and the new one starts
with its section header and every face's interface block, so no packet is lost to the cap and
each file reads alone.  The buffer holds at most ``PENDING_MAX`` bytes (a loop that cannot
flush); a packet past it, and a batch whose write fails (a full disk), is counted as
``capture.not_written`` (logged once); the daemon forwards on.  ``capture.packets`` counts what
the taps took, ``capture.bytes`` and ``capture.rotations`` what was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import Counter
from typing import TYPE_CHECKING

from forwarder.observe._tap import Sink
from icn.wire.pcapng import interface_description, section_header

if TYPE_CHECKING:
    from forwarder.config import CaptureConfig
    from forwarder.face.face import Face, PacketHook
    from forwarder.face.face_table import FaceTable

log = logging.getLogger(__name__)

FLUSH_BYTES = 1 << 20  # a batch this large is written at once
FLUSH_EVERY = 0.1  # seconds: how far a live `icn pcap` or `tshark -r` lags behind at most
PENDING_MAX = 64 << 20  # bytes the taps may buffer before packets are counted, not kept
IOV_MAX = 1024  # buffers per writev (Linux's limit)


class CaptureFile:
    """The capture file and its rotations: the blocks written, the faces described."""

    def __init__(self, path: str, max_bytes: int, files: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.files = files
        self.interfaces: list[bytes] = []  # every face's block, in interface order
        self.header = section_header()
        self.rotations = 0
        self.written_bytes = 0
        self.fd: int | None = None
        self.size = 0
        self.packets_in_file = 0
        self._open()

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

    def write(self, new_faces: list[bytes], blocks: list[bytes], nbytes: int, packets: int) -> None:
        """Append the faces' interface blocks and ``packets`` packet blocks (``nbytes`` in
        all), rotating first when they would take the file past its cap; OSError if it fails."""
        self.interfaces.extend(new_faces)
        grows = nbytes + sum(map(len, new_faces))
        if self.size + grows > self.max_bytes and self.packets_in_file:
            self._rotate()  # the new file has every face's block, these included
            new_faces = []
        self._write([*new_faces, *blocks])
        self.written_bytes += grows
        self.packets_in_file += packets

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class PacketCapture:
    """The taps of one forwarder's faces and the file they fill."""

    def __init__(self, path: str, max_bytes: int, files: int, counters: Counter[str]) -> None:
        self.path = path
        self.counters = counters
        self.file = CaptureFile(path, max_bytes, files)  # OSError: the daemon's config error
        self._new_faces: list[bytes] = []
        self._faces = 0
        # a batch is written at this size, and a file never passes its cap by more
        flush_at = min(FLUSH_BYTES, max(16 * 1024, max_bytes // 8))
        self._sink = Sink(flush_at, max(PENDING_MAX, 4 * flush_at), self.flush)
        self._not_written = 0
        self._dropped_seen = 0  # the sink's dropped count already added to _not_written
        self._error: OSError | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    # ---- taps ------------------------------------------------------------------------------

    def attach(self, faces: FaceTable) -> None:
        """Capture every face ``faces`` holds now and every face it gets later."""
        faces.tap = self.tap
        for face in faces:
            face.set_tap(self.tap)
        with contextlib.suppress(RuntimeError):  # without a loop (tests): flush() by hand
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(FLUSH_EVERY, self._tick, loop)

    def tap(
        self, face: Face, receive: PacketHook, send: PacketHook
    ) -> tuple[PacketHook, PacketHook]:
        """``face``'s receive and send, each recording its packet's block first."""
        index = self._faces
        self._faces += 1
        desc = f"face {face.face_id} local={face.local_uri}"
        self._new_faces.append(interface_description(face.remote_uri, desc, nanoseconds=True))
        return self._sink.tap(index, True, receive), self._sink.tap(index, False, send)

    # ---- writing ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the blocks taken so far (or count them, if the write fails)."""
        if not self._sink.packets and not self._new_faces:
            self._count_dropped()
            return
        batch, packets = self._sink.take()
        self.counters["capture.packets"] += packets
        new_faces, self._new_faces = self._new_faces, []
        if self._closed:
            self._not_written += packets
        else:
            try:
                self.file.write(new_faces, [batch] if batch else [], len(batch), packets)
            except OSError as exc:
                self._not_written += packets
                if self._error is None:
                    self._error = exc
                    log.error("capture %s: %s; packets are counted as not written", self.path, exc)
        self._count_dropped()

    def _count_dropped(self) -> None:
        dropped = self._sink.dropped
        if dropped != self._dropped_seen:
            self.counters["capture.packets"] += dropped - self._dropped_seen
            self._not_written += dropped - self._dropped_seen
            self._dropped_seen = dropped
        self._sync()

    def _sync(self) -> None:
        c = self.counters
        c["capture.bytes"] = self.file.written_bytes
        c["capture.rotations"] = self.file.rotations
        c["capture.not_written"] = self._not_written

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.flush()
        if not self._closed:
            self._timer = loop.call_later(FLUSH_EVERY, self._tick, loop)

    def close(self) -> None:
        """Write what is left and close the file; packets tapped later are counted, not
        written."""
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self.flush()
        self._closed = True
        self.file.close()
        self._sync()


def open_capture(cfg: CaptureConfig, counters: Counter[str]) -> PacketCapture:
    """The capture ``cfg`` asks for (``cfg.file`` set); OSError if the file cannot be made."""
    assert cfg.file is not None
    return PacketCapture(cfg.file, cfg.max_bytes, cfg.files, counters)
