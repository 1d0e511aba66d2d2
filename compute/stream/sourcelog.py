"""The log of a source whose input cannot be read twice (an MQTT topic): every batch it
produces is appended here, and synced, before the broker is told the messages in it were
received.  A restarted source serves its readers from the log and numbers new batches after
it; batches every reader has checkpointed are compacted away.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgpack

COMPACT_EVERY = 1024  # dead batches before the file is rewritten


class SourceLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.batches: dict[int, bytes] = {}
        self._dead = 0

    def load(self) -> dict[int, bytes]:
        """The batches kept, by sequence number (a torn last frame from a crash is dropped)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        unpacker = msgpack.Unpacker()
        unpacker.feed(raw)
        good = 0
        try:
            for seq, content in unpacker:
                self.batches[seq] = content
                good = unpacker.tell()
        except Exception:  # a frame cut short by a crash: everything before it stands
            pass
        if good < len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(good)
        return dict(self.batches)

    def append(self, seq: int, content: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(msgpack.packb([seq, content]))
            f.flush()
            os.fsync(f.fileno())
        self.batches[seq] = content

    def forget_below(self, low: int) -> None:
        newest = max(self.batches, default=-1)  # kept: the next batch is numbered after it
        for seq in [s for s in self.batches if s < low and s != newest]:
            del self.batches[seq]
            self._dead += 1
        if self._dead >= COMPACT_EVERY:
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "wb") as f:
                for seq in sorted(self.batches):
                    f.write(msgpack.packb([seq, self.batches[seq]]))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._dead = 0
