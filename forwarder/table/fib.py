"""Forwarding Information Base: name prefix -> next hops, by longest-prefix match.

Prefixes are keyed by the bytes of their Name TLV-VALUE, so the k-component prefix of a name is
``name[:name_ends[k-1]]`` and a lookup is a few dict probes, longest first.  Only the depths
(component counts) that some entry has are probed: a FIB holding routes of 1 and 3 components
answers a 10-component name in at most two probes, whatever the name's length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TypeVar

from icn.wire.name import component_ends

V = TypeVar("V")


class PrefixDepths:
    """The distinct component counts of the keys of a prefix-keyed map, longest first.

    Shared by the FIB and the strategy choice table, which both answer longest-prefix questions
    on a dict keyed by prefix bytes.  Changes are rare (route and strategy updates), lookups are
    per packet, so ``order`` is a tuple rebuilt on change.
    """

    __slots__ = ("_count", "order")

    def __init__(self) -> None:
        self._count: dict[int, int] = {}
        self.order: tuple[int, ...] = ()

    def add(self, depth: int) -> None:
        n = self._count.get(depth, 0)
        self._count[depth] = n + 1
        if n == 0:
            self.order = tuple(sorted(self._count, reverse=True))

    def remove(self, depth: int) -> None:
        n = self._count[depth] - 1
        if n:
            self._count[depth] = n
        else:
            del self._count[depth]
            self.order = tuple(sorted(self._count, reverse=True))


def longest_prefix(
    table: dict[bytes, V], depths: tuple[int, ...], name: bytes, name_ends: list[int]
) -> V | None:
    """The value of the longest key of ``table`` that is a prefix of ``name``, or None.

    ``depths`` holds the key depths present, longest first (see :class:`PrefixDepths`).
    """
    n = len(name_ends)
    for d in depths:
        if d > n:
            continue
        found = table.get(name[: name_ends[d - 1]] if d else b"")
        if found is not None:
            return found
    return None


def prefix_depth(prefix: bytes) -> int:
    """Component count of a prefix; validates it (DecodeError on a malformed name value)."""
    return len(component_ends(prefix))


class NextHop:
    """One upstream face of a FIB entry and its routing cost."""

    __slots__ = ("cost", "face_id")

    def __init__(self, face_id: int, cost: int = 0) -> None:
        self.face_id = face_id
        self.cost = cost

    def __repr__(self) -> str:
        return f"NextHop(face_id={self.face_id}, cost={self.cost})"


def _nexthop_order(nh: NextHop) -> tuple[int, int]:
    return (nh.cost, nh.face_id)


class FibEntry:
    """A prefix and its next hops, kept sorted by (cost, face_id) so strategies take them in
    preference order without sorting per packet."""

    __slots__ = ("nexthops", "prefix")

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.nexthops: list[NextHop] = []

    def __repr__(self) -> str:
        return f"FibEntry(prefix={self.prefix.hex()}, nexthops={self.nexthops})"


class Fib:
    """Prefix -> :class:`FibEntry`, bounded by ``max_entries`` prefixes.

    Counts "fib.insert" / "fib.erase" for entries created and deleted and "fib.refused_full" for
    a new prefix refused at the cap (next hops of existing prefixes can always be changed).
    """

    __slots__ = ("_counters", "_depths", "_entries", "max_entries")

    def __init__(self, max_entries: int = 100_000, counters: Counter[str] | None = None) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._entries: dict[bytes, FibEntry] = {}
        self._depths = PrefixDepths()

    def add_nexthop(self, prefix: bytes, face_id: int, cost: int = 0) -> bool:
        """Add ``face_id`` under ``prefix``, or update its cost.  False (counted) when full."""
        entry = self._entries.get(prefix)
        if entry is None:
            if len(self._entries) >= self.max_entries:
                self._counters["fib.refused_full"] += 1
                return False
            depth = prefix_depth(prefix)
            entry = self._entries[prefix] = FibEntry(prefix)
            self._depths.add(depth)
            self._counters["fib.insert"] += 1
        for nh in entry.nexthops:
            if nh.face_id == face_id:
                nh.cost = cost
                break
        else:
            entry.nexthops.append(NextHop(face_id, cost))
        entry.nexthops.sort(key=_nexthop_order)
        return True

    def remove_nexthop(self, prefix: bytes, face_id: int) -> bool:
        """Remove one next hop; the entry goes with its last next hop.  False if absent."""
        entry = self._entries.get(prefix)
        if entry is None:
            return False
        for i, nh in enumerate(entry.nexthops):
            if nh.face_id == face_id:
                del entry.nexthops[i]
                if not entry.nexthops:
                    self._erase(entry)
                return True
        return False

    def remove_face(self, face_id: int) -> int:
        """Remove ``face_id`` from every entry (a face went down); return next hops removed."""
        removed = 0
        for entry in list(self._entries.values()):
            kept = [nh for nh in entry.nexthops if nh.face_id != face_id]
            if len(kept) != len(entry.nexthops):
                removed += len(entry.nexthops) - len(kept)
                entry.nexthops = kept
                if not kept:
                    self._erase(entry)
        return removed

    def _erase(self, entry: FibEntry) -> None:
        del self._entries[entry.prefix]
        self._depths.remove(prefix_depth(entry.prefix))
        self._counters["fib.erase"] += 1

    def longest_prefix_match(self, name: bytes, name_ends: list[int]) -> FibEntry | None:
        """The entry of the longest prefix of ``name`` present, or None (no route)."""
        return longest_prefix(self._entries, self._depths.order, name, name_ends)

    def get(self, prefix: bytes) -> FibEntry | None:
        """The entry of exactly ``prefix``."""
        return self._entries.get(prefix)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[FibEntry]:
        """Entries in canonical prefix order (byte order of name values), for fib/list."""
        entries = self._entries
        return iter([entries[p] for p in sorted(entries)])
