"""A bounded store for server state: an entry cap, a byte budget and a time to live.

Calls, finished results and memoized results all arrive at the callers' pace, so each is kept
in one of these: the oldest (or least recently used) entries go first when a bound is reached,
and expired entries are dropped as new ones come in, with no timer per entry.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedStore(Generic[K, V]):
    """``max_entries`` and ``max_bytes`` bound it; entries live ``ttl`` seconds (inf: until
    evicted).  ``lru=True`` makes a hit renew the entry's place (not its expiry).  Evictions
    are counted in ``counters`` under ``<name>.evicted`` and ``<name>.expired``."""

    def __init__(
        self,
        name: str,
        *,
        max_entries: int,
        max_bytes: int = 1 << 62,
        ttl: float = math.inf,
        lru: bool = False,
        counters: Counter[str] | None = None,
    ) -> None:
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.lru = lru
        self.counters: Counter[str] = Counter() if counters is None else counters
        self.bytes = 0
        self._items: OrderedDict[K, tuple[float, V, int]] = OrderedDict()

    def put(self, key: K, value: V, now: float, size: int = 0) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= old[2]
        self._items[key] = (now + self.ttl, value, size)
        self.bytes += size
        self._trim(now)

    def get(self, key: K, now: float) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] <= now:
            self.pop(key)
            self.counters[f"{self.name}.expired"] += 1
            return None
        if self.lru:
            self._items.move_to_end(key)
        return item[1]

    def pop(self, key: K) -> V | None:
        item = self._items.pop(key, None)
        if item is None:
            return None
        self.bytes -= item[2]
        return item[1]

    def __len__(self) -> int:
        return len(self._items)

    def _trim(self, now: float) -> None:
        items = self._items
        while items:
            key, (expires, _, size) = next(iter(items.items()))
            if expires <= now:
                self.counters[f"{self.name}.expired"] += 1
            elif len(items) > self.max_entries or self.bytes > self.max_bytes:
                self.counters[f"{self.name}.evicted"] += 1
            else:
                break  # the front is the oldest (or least recently used) entry
            del items[key]
            self.bytes -= size
