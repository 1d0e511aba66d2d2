"""Event-time window join of two keyed streams (sans-IO).

Both sides' records are buffered per window and key; when the watermark passes a window's end,
every key present on both sides gives the cross product of its left and right records, in
arrival order (left-major).  The window is then dropped: allowed lateness does not apply, a
record reaching a window that already fired is dropped and counted ``late_dropped``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from heapq import heapify, heappop, heappush
from typing import Any

from compute.stream.windows import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    SNAPSHOT_VERSION,
    Out,
    WindowSpec,
    check_snapshot,
    decode_key,
    encode_key,
)

_LEFT, _RIGHT = 0, 1


class WindowJoin:
    """Buffers both sides per (window, key); ``advance`` emits the joined pairs of fired windows.

    At most ``max_buffered`` (record, window) entries are held (a record of a sliding join is
    buffered in each of its windows); beyond, a record is dropped for that window and counted
    ``state_full``.  Counters: ``left``, ``right`` (records), ``fired`` (joined pairs emitted),
    ``late_dropped`` (per window a record missed), ``state_full``.
    """

    def __init__(self, spec: WindowSpec, *, max_buffered: int = 1_000_000) -> None:
        if not isinstance(max_buffered, int) or max_buffered < 1:
            raise ValueError(f"max_buffered={max_buffered!r}: give an int >= 1")
        self.spec = spec
        self.max_buffered = max_buffered
        self._size = spec.size_ms
        self._wm = MIN_WATERMARK
        # start -> key -> [left values, right values]; keys in first-seen order on either side
        self._windows: dict[int, dict[Any, list[list[Any]]]] = {}
        self._pending: list[int] = []  # heap of window starts
        self._buffered = 0
        self.counters: Counter[str] = Counter()

    @property
    def watermark(self) -> int:
        return self._wm

    @property
    def buffered(self) -> int:
        """(record, window) entries held."""
        return self._buffered

    def add_left(self, key: Hashable, t: int, value: Any) -> list[Out]:
        self.counters["left"] += 1
        self._add(_LEFT, key, t, value)
        return []

    def add_right(self, key: Hashable, t: int, value: Any) -> list[Out]:
        self.counters["right"] += 1
        self._add(_RIGHT, key, t, value)
        return []

    def _add(self, side: int, key: Hashable, t: int, value: Any) -> None:
        size, windows = self._size, self._windows
        for start in self.spec.starts_of(t):
            if start + size <= self._wm:
                self.counters["late_dropped"] += 1
                continue
            if self._buffered >= self.max_buffered:
                self.counters["state_full"] += 1
                continue
            sides = windows.get(start)
            if sides is None:
                sides = windows[start] = {}
                heappush(self._pending, start)
            both = sides.get(key)
            if both is None:
                both = sides[key] = [[], []]
            both[side].append(value)
            self._buffered += 1

    def advance(self, watermark: int) -> list[Out]:
        """Joins and drops every window with ``end <= watermark`` (by end, start, key first
        seen).  A watermark not above the current one is ignored."""
        if watermark <= self._wm:
            return []
        self._wm = watermark
        return self._fire(watermark)

    def _fire(self, watermark: int) -> list[Out]:
        out: list[Out] = []
        size, pending = self._size, self._pending
        while pending and pending[0] + size <= watermark:
            start = heappop(pending)
            end = start + size
            for key, (lefts, rights) in self._windows.pop(start).items():
                self._buffered -= len(lefts) + len(rights)
                for left in lefts:
                    for right in rights:
                        pair = {
                            "key": key,
                            "start": start,
                            "end": end,
                            "left": left,
                            "right": right,
                        }
                        out.append((end - 1, key, pair))
        self.counters["fired"] += len(out)
        return out

    def flush(self) -> list[Out]:
        """End of stream: joins every window still open."""
        self._wm = MAX_WATERMARK
        return self._fire(MAX_WATERMARK + self._size)

    def snapshot(self) -> dict[str, Any]:
        """The state as msgpack-able plain data (str map keys; keys encoded by ``encode_key``)."""
        return {
            "kind": "WindowJoin",
            "version": SNAPSHOT_VERSION,
            "size_ms": self.spec.size_ms,
            "slide_ms": self.spec.slide,
            "allowed_lateness_ms": self.spec.allowed_lateness_ms,
            "watermark": self._wm,
            "counters": dict(self.counters),
            "windows": [
                [
                    start,
                    [
                        [encode_key(key), list(lefts), list(rights)]
                        for key, (lefts, rights) in sides.items()
                    ],
                ]
                for start, sides in sorted(self._windows.items())
            ],
        }

    @classmethod
    def restore(cls, spec: WindowSpec, snap: Any, *, max_buffered: int = 1_000_000) -> WindowJoin:
        """The join ``snapshot`` returned (after a msgpack round trip)."""
        data = check_snapshot(snap, "WindowJoin", spec)
        join = cls(spec, max_buffered=max_buffered)
        try:
            join._wm = int(data["watermark"])
            join.counters.update({str(k): int(v) for k, v in data["counters"].items()})
            for start, entries in data["windows"]:
                join._windows[start] = {
                    decode_key(key): [list(lefts), list(rights)] for key, lefts, rights in entries
                }
                join._buffered += sum(len(lefts) + len(rights) for _, lefts, rights in entries)
                join._pending.append(start)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed WindowJoin snapshot ({exc!r})") from None
        heapify(join._pending)
        return join
