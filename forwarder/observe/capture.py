"""Packet capture: every link packet each face sends and receives, into a pcapng file.

The forwarder's part is as small as it can be, since it runs per packet: a tap spliced into
each face (:meth:`~forwarder.face.face.Face.set_tap`; a forwarder without a capture pays
nothing) appends ``(face id, inbound, time, packet)`` to a list.  Every ``BATCH`` packets or
``FLUSH_EVERY`` seconds the list goes, as one ``marshal`` payload, down a pipe to the capture's
writer process (:mod:`forwarder.observe.capture_writer`), which encodes the pcapng blocks and
writes and rotates the file (:mod:`forwarder.observe.capture_file`, format in
:mod:`icn.wire.pcapng`).  Encoding in the forwarder cost a quarter of its throughput
(bench/fwd_throughput.py --pcap); handing the batch over costs it a few percent, and the disk
never blocks the packet path.

Bounded: at most ``MAX_PENDING`` bytes wait for the pipe; a batch that finds no room (the
writer cannot keep up, or died) is dropped and its packets counted as ``capture.not_written``,
as are the writer's own write errors.  ``capture.packets`` counts what the taps saw,
``capture.bytes`` and ``capture.rotations`` what the writer wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import marshal
import os
import subprocess
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING

from forwarder.observe.capture_file import FaceRecord, Record
from forwarder.observe.capture_writer import LENGTH, TOTALS

if TYPE_CHECKING:
    from forwarder.config import CaptureConfig
    from forwarder.face.face import Face, PacketHook
    from forwarder.face.face_table import FaceTable

log = logging.getLogger(__name__)

BATCH = 4096  # packets per hand-over at most (about 5 MB of 1 KiB Data)
FLUSH_EVERY = 0.1  # seconds: how far a live `icn pcap` or `tshark -r` lags behind at most
MAX_PENDING = 64 * 1024 * 1024  # bytes waiting for the pipe before batches are dropped
PIPE_SIZE = 1 << 20  # what Linux allows an unprivileged pipe by default
CLOSE_TIMEOUT = 30.0  # seconds the writer may take to finish the file when the daemon stops


class PacketCapture:
    """The taps of one forwarder's faces and the writer process they feed."""

    def __init__(self, path: str, max_bytes: int, files: int, counters: Counter[str]) -> None:
        self.path = path
        self.counters = counters
        # fail here, with the path, rather than in the writer after the daemon said ready
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        writer = "forwarder.observe.capture_writer"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", writer, path, str(max_bytes), str(files)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._to_writer = self._proc.stdin.fileno()
        self._from_writer = self._proc.stdout.fileno()
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._to_writer, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        os.set_blocking(self._to_writer, False)
        os.set_blocking(self._from_writer, False)
        self._records: list[Record] = []
        self._faces: list[FaceRecord] = []
        self._out = bytearray()  # framed batches the pipe has not taken yet
        self._acks = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_to_write = False
        self._closed = False
        self._writer_lost = 0  # packets the writer reported not written, so far
        self._base = Counter({k: counters[k] for k in ("capture.bytes", "capture.rotations")})

    # ---- taps ------------------------------------------------------------------------------

    def attach(self, faces: FaceTable) -> None:
        """Capture every face ``faces`` holds now and every face it gets later."""
        faces.tap = self.hooks
        for face in faces:
            face.set_tap(self.hooks)
        with contextlib.suppress(RuntimeError):  # without a loop (tests): flush() by hand
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self._from_writer, self._read_totals)
            self._timer = self._loop.call_later(FLUSH_EVERY, self._tick)

    def hooks(self, face: Face) -> tuple[PacketHook, PacketHook]:
        """The receive and send hooks of ``face``: each appends a record, nothing more."""
        face_id = face.face_id
        self._faces.append((face_id, face.remote_uri, face.local_uri))
        records = self._records
        append = records.append
        now = time.time_ns
        flush = self.flush

        def received(wire: bytes) -> None:
            append((face_id, True, now(), wire))
            if len(records) >= BATCH:
                flush()

        def sent(wire: bytes) -> None:
            append((face_id, False, now(), wire))
            if len(records) >= BATCH:
                flush()

        return received, sent

    # ---- hand-over -------------------------------------------------------------------------

    def flush(self) -> None:
        """Hand the records taken so far to the writer (or count them, if it has no room)."""
        records = self._records
        if not records and not self._faces:
            return
        n = len(records)
        self.counters["capture.packets"] += n
        if self._closed:
            self.counters["capture.not_written"] += n
            records.clear()
            return
        payload = marshal.dumps((self._faces, records))
        records.clear()  # the same list: the hooks hold its append
        self._faces = []
        if len(self._out) + len(payload) > MAX_PENDING:
            self.counters["capture.not_written"] += n
            return
        self._out += LENGTH.pack(len(payload))
        self._out += payload
        self._write_some()

    def _write_some(self) -> None:
        try:
            while self._out:
                written = os.write(self._to_writer, self._out)
                del self._out[:written]
        except BlockingIOError:
            pass
        except OSError as exc:  # the writer died: say so once, count from now on
            if not self._closed:
                log.error("capture %s: the writer process is gone (%s)", self.path, exc)
            self._closed = True
            self._out.clear()
            return
        want = bool(self._out)
        if want != self._waiting_to_write and self._loop is not None:
            if want:
                self._loop.add_writer(self._to_writer, self._write_some)
            else:
                self._loop.remove_writer(self._to_writer)
            self._waiting_to_write = want

    def _read_totals(self) -> None:
        """The writer's totals after each batch: its counters, at their latest."""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self._from_writer, 64 * TOTALS.size):
                self._acks += chunk
        whole = len(self._acks) // TOTALS.size * TOTALS.size
        if whole:
            _written, not_written, size, rotations = TOTALS.unpack_from(
                self._acks, whole - TOTALS.size
            )
            del self._acks[:whole]
            c = self.counters
            c["capture.bytes"] = self._base["capture.bytes"] + size
            c["capture.rotations"] = self._base["capture.rotations"] + rotations
            if not_written > self._writer_lost:
                c["capture.not_written"] += not_written - self._writer_lost
                self._writer_lost = not_written

    def _tick(self) -> None:
        self.flush()
        if self._loop is not None and not self._closed:
            self._timer = self._loop.call_later(FLUSH_EVERY, self._tick)

    def close(self) -> None:
        """Hand over what is left, let the writer finish the file, and wait for it (bounded);
        packets tapped later are counted, not written."""
        if self._proc.returncode is not None and self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self.flush()
        self._closed = True
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._from_writer)
            if self._waiting_to_write:
                self._loop.remove_writer(self._to_writer)
        deadline = time.monotonic() + CLOSE_TIMEOUT
        os.set_blocking(self._to_writer, True)
        with contextlib.suppress(OSError):
            view = memoryview(self._out)
            while view and time.monotonic() < deadline:
                view = view[os.write(self._to_writer, view) :]
        self._out = bytearray()
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        try:
            self._proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.error("capture %s: the writer did not finish in %g s", self.path, CLOSE_TIMEOUT)
            self._proc.kill()
            self._proc.wait(5)
        os.set_blocking(self._from_writer, True)
        self._read_totals()
        self._proc.stdout.close()


def open_capture(cfg: CaptureConfig, counters: Counter[str]) -> PacketCapture:
    """The capture ``cfg`` asks for (``cfg.file`` set); OSError if the file cannot be made."""
    assert cfg.file is not None
    return PacketCapture(cfg.file, cfg.max_bytes, cfg.files, counters)
