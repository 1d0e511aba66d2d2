"""Content Store: a bounded LRU cache of Data packets, answering Interests locally.

Two structures over the same entries: an OrderedDict from Data name to entry, which is both the
exact-name index (one probe, the common case) and the LRU order (``move_to_end`` on a hit,
``popitem(last=False)`` to evict, both O(1) in C); and a SortedList of the names, for CanBePrefix
lookups and prefix erasure: names under a prefix are contiguous in byte order and byte order is
NDN canonical order, so the leftmost match is the first acceptable name of a range scan.

One Data per name: a newer Data with the same name replaces the old one (as a producer's newer
version should) and restarts its freshness.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, OrderedDict

from sortedcontainers import SortedList

from icn.wire import tlv_types as T
from icn.wire.packet import DataView, InterestView


class _CsEntry:
    __slots__ = ("_digest", "fresh_until", "name", "size", "unsolicited", "wire")

    def __init__(self, name: bytes, wire: bytes, fresh_until: float, unsolicited: bool) -> None:
        self.name = name
        self.wire = wire
        self.size = len(wire)
        self.fresh_until = fresh_until
        self.unsolicited = unsolicited
        self._digest: bytes | None = None

    def digest(self) -> bytes:
        """Implicit digest of the Data (SHA-256 of its TLV), computed for digest Interests only."""
        d = self._digest
        if d is None:
            d = self._digest = hashlib.sha256(self.wire).digest()
        return d


def _fresh_until(now: float, freshness_ms: int) -> float:
    # FreshnessPeriod 0 or absent: stale at once, never answers MustBeFresh.
    return now + freshness_ms * 0.001 if freshness_ms > 0 else -math.inf


class ContentStore:
    """Data cache bounded by an entry cap and a byte budget (sum of Data wire sizes), LRU.

    ``admit`` / ``serve`` are the cs/config flags (NFD CS_ENABLE_ADMIT / CS_ENABLE_SERVE).
    Counts "cs.hit", "cs.miss", "cs.insert", "cs.replace", "cs.evicted_lru", "cs.erased",
    "cs.refused_admit" (admit off or capacity 0) and "cs.refused_too_large".
    """

    __slots__ = (
        "_bytes",
        "_counters",
        "_entries",
        "_max_bytes",
        "_max_entries",
        "_names",
        "admit",
        "hits",
        "misses",
        "serve",
    )

    def __init__(
        self,
        max_entries: int = 65_536,
        max_bytes: int = 256 * 1024 * 1024,
        counters: Counter[str] | None = None,
    ) -> None:
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._entries: OrderedDict[bytes, _CsEntry] = OrderedDict()  # LRU first
        self._names = SortedList()
        self._bytes = 0
        self._max_entries = 0
        self._max_bytes = 0
        self.admit = True
        self.serve = True
        self.hits = 0
        self.misses = 0
        self.set_limits(max_entries, max_bytes)

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def set_limits(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        """Change the bounds (None keeps one); shrinking evicts least recently used at once."""
        if max_entries is not None:
            if max_entries < 0:
                raise ValueError("max_entries must be >= 0")
            self._max_entries = max_entries
        if max_bytes is not None:
            if max_bytes < 0:
                raise ValueError("max_bytes must be >= 0")
            self._max_bytes = max_bytes
        self._evict()

    def insert(self, data: DataView, now: float, unsolicited: bool = False) -> bool:
        """Cache ``data``; False (counted) if admission is off, capacity is 0 or it is larger than
        the whole byte budget."""
        if not self.admit or not self._max_entries:
            self._counters["cs.refused_admit"] += 1
            return False
        wire = data.wire
        if len(wire) > self._max_bytes:
            self._counters["cs.refused_too_large"] += 1
            return False
        name = data.name
        entries = self._entries
        old = entries.get(name)
        if old is None:
            entries[name] = _CsEntry(name, wire, _fresh_until(now, data.freshness), unsolicited)
            self._names.add(name)
            self._bytes += len(wire)
            self._counters["cs.insert"] += 1
        else:
            # Solicited Data clears the unsolicited mark; unsolicited Data does not set it on a
            # Data someone asked for.
            entries[name] = _CsEntry(
                name, wire, _fresh_until(now, data.freshness), old.unsolicited and unsolicited
            )
            entries.move_to_end(name)
            self._bytes += len(wire) - old.size
            self._counters["cs.replace"] += 1
        if len(entries) > self._max_entries or self._bytes > self._max_bytes:
            self._evict()
        return True

    def _evict(self) -> None:
        entries = self._entries
        n = 0
        while entries and (len(entries) > self._max_entries or self._bytes > self._max_bytes):
            name, entry = entries.popitem(last=False)
            self._names.remove(name)
            self._bytes -= entry.size
            n += 1
        if n:
            self._counters["cs.evicted_lru"] += n

    def lookup(self, interest: InterestView, now: float) -> bytes | None:
        """The wire of the cached Data that answers ``interest``, or None.

        Follows ``Interest::matchesData``, filtered by MustBeFresh; with CanBePrefix the leftmost
        (smallest in canonical order) acceptable Data wins, as in NFD.  A hit becomes the most
        recently used entry.
        """
        if not self.serve:
            return None
        entries = self._entries
        name = interest.name
        if not interest.can_be_prefix:
            entry = entries.get(name)
            if entry is None or (interest.must_be_fresh and now >= entry.fresh_until):
                entry = self._by_digest(interest, now)
        else:
            entry = self._by_digest(interest, now) or self._leftmost(name, interest, now)
        if entry is None:
            self.misses += 1
            self._counters["cs.miss"] += 1
            return None
        entries.move_to_end(entry.name)
        self.hits += 1
        self._counters["cs.hit"] += 1
        return entry.wire

    def _by_digest(self, interest: InterestView, now: float) -> _CsEntry | None:
        """The Data whose full name is the Interest name, if it ends in an implicit digest."""
        name = interest.name
        ends = interest.name_ends
        start = ends[-2] if len(ends) > 1 else 0
        if name[start] != T.COMP_IMPLICIT_DIGEST:
            return None
        entry = self._entries.get(name[:start])
        if (
            entry is None
            or (interest.must_be_fresh and now >= entry.fresh_until)
            or entry.digest() != name[start + 2 :]
        ):
            return None
        return entry

    def _leftmost(self, prefix: bytes, interest: InterestView, now: float) -> _CsEntry | None:
        entries = self._entries
        must_be_fresh = interest.must_be_fresh
        for name in self._names.irange(minimum=prefix):
            if not name.startswith(prefix):
                return None
            entry = entries[name]
            if not must_be_fresh or now < entry.fresh_until:
                return entry
        return None

    def erase(self, prefix: bytes, limit: int | None = None) -> int:
        """Erase the Data under ``prefix`` (at most ``limit``, in canonical order); return count."""
        names = self._names
        victims: list[bytes] = []
        for name in names.irange(minimum=prefix):
            if not name.startswith(prefix) or (limit is not None and len(victims) >= limit):
                break
            victims.append(name)
        for name in victims:
            names.remove(name)
            self._bytes -= self._entries.pop(name).size
        if victims:
            self._counters["cs.erased"] += len(victims)
        return len(victims)
