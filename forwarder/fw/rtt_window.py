"""The last RTT samples of one next hop, for asf's ``clone-after~pNN`` (a percentile of them).

A ring of the last ``size`` samples, in arrival order, beside the same samples sorted: a new
sample replaces the oldest in both (a bisect and two list moves of at most ``size`` items), so a
percentile is one index, read for every Interest the prefix sends, and nothing is sorted again.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort


class RttWindow:
    """At most ``size`` samples (seconds), the oldest out first."""

    __slots__ = ("_next", "_ring", "_sorted", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an RTT window needs size >= 1")
        self.size = size
        self._ring: list[float] = []
        self._sorted: list[float] = []
        self._next = 0  # once full, the oldest sample's place in the ring

    def add(self, rtt: float) -> None:
        ring, ordered = self._ring, self._sorted
        if len(ring) < self.size:
            ring.append(rtt)
        else:
            old = ring[self._next]
            ring[self._next] = rtt
            self._next = (self._next + 1) % self.size
            del ordered[bisect_left(ordered, old)]
        insort(ordered, rtt)

    def percentile(self, p: float) -> float | None:
        """The nearest-rank ``p``-th percentile (0 < p <= 100) of the samples, None without any:
        the smallest sample that at least p% of them do not exceed."""
        ordered = self._sorted
        if not ordered:
            return None
        return ordered[max(0, math.ceil(p * len(ordered) / 100.0) - 1)]

    def __len__(self) -> int:
        return len(self._ring)
