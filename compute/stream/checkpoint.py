"""Checkpoints of one operator instance: its state and input position, saved to a local file.

An entry says: after reading every input batch below ``in_pos`` and producing every output
batch below ``out_seq``, the operator's state was ``state``.  A restarted instance resumes from
the newest entry its readers do not need to go back behind (``out_seq`` at most every
reader's durable position) and produces the same batches again from there, so readers that
were further on lose nothing and get nothing twice.  Older entries are dropped once no reader
can need them; the instance tells its own producers it needs input from the oldest entry it
keeps.  (How many are kept is bounded by the producer's push-back: an operator whose readers'
checkpoints lag stops stepping, hence checkpointing, at ``buffer x 16`` batches ahead.)
The file is replaced atomically (write, fsync, rename): a crash leaves the old one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from compute.stream.errors import StreamError


@dataclass
class Entry:
    in_pos: int
    out_seq: int
    state: Any


class Checkpoints:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[Entry] = []
        self.readers: dict[str, tuple[int, int]] = {}

    def load(self) -> None:
        """Read the file if there is one; StreamError naming it when it is damaged."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            data = msgpack.unpackb(raw, strict_map_key=False)
            self.entries = [Entry(e[0], e[1], e[2]) for e in data["entries"]]
            self.readers = {r: (c, d) for r, (c, d) in data["readers"].items()}
        except Exception as exc:
            raise StreamError(
                f"checkpoint {self.path} is damaged ({exc}); remove it to start this operator "
                "from the beginning"
            ) from None

    def restore_point(self, readers: dict[str, tuple[int, int]] | None = None) -> Entry | None:
        """The newest entry no reader needs to go back behind (readers: reader -> (consumed,
        durable); the saved ones by default)."""
        readers = self.readers if readers is None else readers
        need = min((d for _, d in readers.values()), default=None)
        fit = [e for e in self.entries if need is None or e.out_seq <= need]
        return fit[-1] if fit else (self.entries[0] if self.entries else None)

    def save(self, entry: Entry, readers: dict[str, tuple[int, int]]) -> None:
        self.entries.append(entry)
        point = self.restore_point(readers)
        if point is not None:
            self.entries = self.entries[self.entries.index(point) :]
        self.readers = dict(readers)
        data = {
            "entries": [[e.in_pos, e.out_seq, e.state] for e in self.entries],
            "readers": {r: list(v) for r, v in readers.items()},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(msgpack.packb(data))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
