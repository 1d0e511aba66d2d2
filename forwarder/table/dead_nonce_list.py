"""Dead Nonce List: (Name, Nonce) pairs of Interests that recently left the PIT.

It catches looping Interests that come back after their PIT entry is gone.  As in NFD it stores
a hash of the pair, not the bytes: a false positive (one in about 2**64 / entries) only costs one
Interest dropped as a loop, and an entry costs a few dozen bytes whatever the name's length.
Unlike NFD's auto-tuned capacity, entries carry their insertion time and leave after exactly
``lifetime``; ``max_entries`` is a hard bound against floods, enforced by evicting the oldest.
"""

from __future__ import annotations

from collections import Counter, deque


class DeadNonceList:
    """Time-bounded, size-bounded set of (name, nonce) hashes.

    Counts "dnl.insert", "dnl.expired" (left after the lifetime) and "dnl.evicted" (pushed out
    early by the entry cap: loops slower than that are no longer caught).
    """

    __slots__ = ("_counters", "_live", "_queue", "lifetime", "max_entries")

    def __init__(
        self,
        lifetime: float = 6.0,
        max_entries: int = 1 << 20,
        counters: Counter[str] | None = None,
    ) -> None:
        if lifetime <= 0 or max_entries < 0:
            raise ValueError("lifetime must be > 0 and max_entries >= 0")
        self.lifetime = lifetime
        self.max_entries = max_entries
        self._counters: Counter[str] = Counter() if counters is None else counters
        # Insertion order is time order (``now`` is monotonic), so expiry and eviction both pop
        # from the left.  A pair added twice is queued twice; ``_live`` counts its copies.
        self._queue: deque[tuple[float, int]] = deque()
        self._live: dict[int, int] = {}

    def add(self, name: bytes, nonce: bytes, now: float) -> None:
        """Record that the Interest (name, nonce) left the PIT at ``now``."""
        if not self.max_entries:
            return
        queue = self._queue
        if queue and queue[0][0] <= now - self.lifetime:
            self._purge(now)
        if len(queue) >= self.max_entries:
            self._pop_oldest()
            self._counters["dnl.evicted"] += 1
        h = hash((name, nonce))
        queue.append((now, h))
        live = self._live
        live[h] = live.get(h, 0) + 1
        self._counters["dnl.insert"] += 1

    def has(self, name: bytes, nonce: bytes, now: float) -> bool:
        """True if (name, nonce) was added less than ``lifetime`` before ``now``."""
        queue = self._queue
        if queue and queue[0][0] <= now - self.lifetime:
            self._purge(now)
        return hash((name, nonce)) in self._live

    def _purge(self, now: float) -> None:
        queue = self._queue
        deadline = now - self.lifetime
        n = 0
        while queue and queue[0][0] <= deadline:
            self._pop_oldest()
            n += 1
        self._counters["dnl.expired"] += n

    def _pop_oldest(self) -> None:
        _, h = self._queue.popleft()
        live = self._live
        n = live[h] - 1
        if n:
            live[h] = n
        else:
            del live[h]

    def __len__(self) -> int:
        return len(self._queue)
