"""Packet capture: every link packet each face sends and receives, into a pcapng file.

The file format is :mod:`icn.wire.pcapng`'s: an interface per face (numbered once for the
whole capture), PPP 0x0077 frames, the direction in each packet's flags.

The capture splices itself into each face's receive and send callbacks
(:meth:`~forwarder.face.face.Face.set_tap`; a forwarder without a capture pays nothing).  Per
packet it builds the whole block with one ``struct`` call (a layout per packet size, kept; the
time in nanoseconds, as ``time.time_ns`` gives it) and appends it to a list; every
``FLUSH_BYTES`` or ``FLUSH_EVERY`` seconds the list goes to the file in one ``os.writev`` per
thousand blocks.  What it was measured against
(bench/fwd_throughput.py --pcap, capture on / off): a block built in a growing buffer cost a
quarter of the throughput; a writer process fed by a pipe, a fifth (the pickling and the pipe's
copies); a writer thread, two fifths (the thread and the event loop taking the GIL from each
other at every batch).  Writing from the loop's own thread, whole batches at a time, costs the
least of them.

Bounded: before a batch that would take the file past ``max_bytes``, the file is closed and
rotated (FILE -> FILE.1 -> ... ``files`` files in all; the oldest goes), and the new one starts
with its section header and every face's interface block, so no packet is lost to the cap and
each file reads alone.  A write that fails (a full disk) drops its batch, counts its packets as
``capture.not_written`` and logs once; the daemon forwards on.  ``capture.packets`` counts what
the taps saw, ``capture.bytes`` and ``capture.rotations`` what was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from icn.wire.pcapng import (
    EPB,
    EPB_HEAD,
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

FLUSH_BYTES = 1 << 20  # a batch this large is written at once
FLUSH_EVERY = 0.1  # seconds: how far a live `icn pcap` or `tshark -r` lags behind at most
MASK32 = 0xFFFFFFFF
IOV_MAX = 1024  # buffers per writev (Linux's limit)
LAYOUTS_MAX = 4096  # packet sizes whose block layout is kept (then the cache starts again)

# the direction options without padding: (out, in)
_FLAGS = (EPB_TAILS[0], EPB_TAILS[4])
_HEAD_FORMAT = EPB_HEAD.format.lstrip("<")


def block_layout(n: int) -> struct.Struct:
    """The whole Enhanced Packet Block around an ``n``-byte packet: head (type, length,
    interface, time high and low, lengths, PPP 0x0077), the packet, padding, the direction
    option and the end of options, the length again."""
    return struct.Struct(f"<{_HEAD_FORMAT}{n}s{-(n + 2) & 3}x12sI")


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
        self._blocks: list[bytes] = []  # the taps append here; flush() takes the lot
        self._size = [0]  # bytes in _blocks (a list: the taps add to it in place)
        self._new_faces: list[bytes] = []
        self._faces = 0
        # per packet size: its block's pack, the block's length, the frame's length
        self._layouts: dict[int, tuple[Callable[..., bytes], int, int]] = {}
        # a batch is written at this size, and a file never passes its cap by more
        self._flush_at = min(FLUSH_BYTES, max(16 * 1024, max_bytes // 8))
        self._not_written = 0
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
        append = self._blocks.append
        size = self._size
        flush_at = self._flush_at
        flush = self.flush
        now = time.time_ns
        layouts = self._layouts
        layout = self._layout
        flags_out, flags_in = _FLAGS

        def received(wire: bytes) -> None:
            pack, total, n2 = layouts.get(len(wire)) or layout(len(wire))
            ns = now()
            append(
                pack(
                    EPB, total, index, ns >> 32, ns & MASK32, n2, n2, PPP_NDN, wire, flags_in, total
                )
            )
            size[0] += total
            if size[0] >= flush_at:
                flush()
            receive(wire)

        def sent(wire: bytes) -> None:
            pack, total, n2 = layouts.get(len(wire)) or layout(len(wire))
            ns = now()
            append(
                pack(
                    EPB,
                    total,
                    index,
                    ns >> 32,
                    ns & MASK32,
                    n2,
                    n2,
                    PPP_NDN,
                    wire,
                    flags_out,
                    total,
                )
            )
            size[0] += total
            if size[0] >= flush_at:
                flush()
            send(wire)

        return received, sent

    def _layout(self, n: int) -> tuple[Callable[..., bytes], int, int]:
        if len(self._layouts) >= LAYOUTS_MAX:
            self._layouts.clear()
        lay = block_layout(n)
        entry = self._layouts[n] = (lay.pack, lay.size, n + 2)
        return entry

    # ---- writing ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the blocks taken so far (or count them, if the write fails)."""
        blocks = self._blocks
        if not blocks and not self._new_faces:
            return
        batch = blocks[:]
        blocks.clear()  # the same list: the taps hold its append
        nbytes, self._size[0] = self._size[0], 0
        packets = len(batch)
        self.counters["capture.packets"] += packets
        new_faces, self._new_faces = self._new_faces, []
        if self._closed:
            self._not_written += packets
        else:
            try:
                self.file.write(new_faces, batch, nbytes, packets)
            except OSError as exc:
                self._not_written += packets
                if self._error is None:
                    self._error = exc
                    log.error("capture %s: %s; packets are counted as not written", self.path, exc)
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
