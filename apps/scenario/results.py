"""The results files services and workloads write (``results/<name>.jsonl``), read back.

One JSON object a line: an operation (``ctx.record``: ``t``, ``sent``, ``ok``, ``latency``,
``bytes``, ``error``) or a metric (``ctx.metric``: ``t``, ``metric``, ``value``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of ``path`` (none if it does not exist)."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict):
                rows.append(row)
    return rows


def read_complete(path: Path, offset: int) -> bytes:
    """The complete lines of ``path`` written after byte ``offset`` (a line still being
    written waits for the next read); empty if the file is not there yet."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return b""
    return chunk[: chunk.rfind(b"\n") + 1]


class LiveCounts:
    """Successes and failures recorded so far, read incrementally from the workloads' results
    files (for the live view; records reach the files about every half second)."""

    def __init__(self) -> None:
        self._offsets: dict[str, int] = {}
        self.ok = 0
        self.failed = 0

    def update(self, paths: dict[str, Path]) -> tuple[int, int]:
        for name, path in paths.items():
            offset = self._offsets.get(name, 0)
            complete = read_complete(path, offset)
            self._offsets[name] = offset + len(complete)
            # json.dumps writes these exactly so; metric lines hold neither
            self.ok += complete.count(b'"ok": true')
            self.failed += complete.count(b'"ok": false')
        return self.ok, self.failed
