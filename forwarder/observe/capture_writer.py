"""The capture's writer process: batches of packets in on stdin, a pcapng file out.

``python -m forwarder.observe.capture_writer PATH MAX_BYTES FILES``, started by
:class:`~forwarder.observe.capture.PacketCapture`.  Each batch comes as a 4-byte length and a
``marshal`` payload ``(faces, records)`` (:mod:`forwarder.observe.capture_file`'s records);
after each, the writer answers on stdout with its totals (``TOTALS``: packets written, not
written, bytes, rotations), which the forwarder turns into its ``capture.*`` counters.  At the
end of stdin it closes the file and exits 0.  The first write error is logged on stderr (the
forwarder's log); the packets it cost are counted, and the writer goes on.
"""

from __future__ import annotations

import marshal
import os
import struct
import sys

from forwarder.observe.capture_file import CaptureFile

LENGTH = struct.Struct("<I")
TOTALS = struct.Struct("<4Q")
MAX_BATCH = 1 << 30  # a length beyond this is not ours: stop rather than allocate it


def _read_exact(fd: int, n: int) -> bytes | None:
    parts: list[bytes] = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def serve(path: str, max_bytes: int, files: int, fd_in: int = 0, fd_out: int = 1) -> int:
    capture = CaptureFile(path, max_bytes, files)
    reported = False
    try:
        while True:
            head = _read_exact(fd_in, LENGTH.size)
            if head is None:
                return 0
            (length,) = LENGTH.unpack(head)
            if length > MAX_BATCH:
                print(f"capture {path}: a batch of {length} bytes; stopping", file=sys.stderr)
                return 1
            body = _read_exact(fd_in, length)
            if body is None:
                return 0
            faces, records = marshal.loads(body)
            capture.write(faces, records)
            if capture.error is not None and not reported:
                reported = True
                print(
                    f"capture {path}: {capture.error}; packets are counted as not written",
                    file=sys.stderr,
                    flush=True,
                )
            t = capture.totals
            os.write(fd_out, TOTALS.pack(t.written, t.not_written, t.bytes, t.rotations))
    finally:
        capture.close()


def main(argv: list[str]) -> int:
    path, max_bytes, files = argv[0], int(argv[1]), int(argv[2])
    # the capture takes the CPU forwarding leaves: behind, it falls back on its bounded queue
    # (and counts what it drops), rather than slowing the packets it records
    os.nice(10)
    try:
        return serve(path, max_bytes, files)
    except BrokenPipeError:
        return 0  # the forwarder went away: what was written stays


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
