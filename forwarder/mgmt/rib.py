"""Routing Information Base: the routes applications and routing protocols register, and the FIB
next hops they imply.

The FIB only answers "where do I send an Interest under this prefix"; it cannot say who asked for
a next hop, until when, or whether it should reach longer prefixes.  The RIB keeps that: routes
keyed by (prefix, face, origin) with a cost, the NFD flags CHILD_INHERIT and CAPTURE, and an
optional expiry.  After each change it recomputes, as NFD does, the next hops of the changed prefix
and of its RIB descendants: an entry's own routes plus the CHILD_INHERIT routes of its ancestors
(nearest first) up to and including the first ancestor with a CAPTURE route, the lowest cost per
face.  Entries are kept in a sorted map, so the descendants of a prefix are one range scan (names
under a prefix are contiguous in byte order).  Sans-IO: time comes from an injected clock and the
daemon calls :meth:`Rib.expire` when :meth:`Rib.next_expiry` says so.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from sortedcontainers import SortedDict

from forwarder.table.fib import Fib, prefix_depth
from icn.wire.name import component_ends

ROUTE_CHILD_INHERIT = 1
ROUTE_CAPTURE = 2

ORIGIN_APP = 0
ORIGIN_AUTOREG = 64
ORIGIN_CLIENT = 65
ORIGIN_AUTOCONF = 66
ORIGIN_NLSR = 128
ORIGIN_PREFIXANN = 129
ORIGIN_STATIC = 255


@dataclass(slots=True)
class Route:
    """One registration of a prefix: via ``face_id``, by ``origin``, until ``expires_at``."""

    face_id: int
    origin: int = ORIGIN_APP
    cost: int = 0
    flags: int = ROUTE_CHILD_INHERIT
    expires_at: float | None = None  # absolute clock time; None = never


def _find(routes: list[Route], face_id: int, origin: int) -> int:
    for i, r in enumerate(routes):
        if r.face_id == face_id and r.origin == origin:
            return i
    return -1


class Rib:
    """Prefix -> routes, at most ``max_routes`` routes, driving ``fib``.

    The FIB entry of every RIB prefix holds exactly the computed next hops; prefixes outside the
    RIB get no entry of their own.  Counts "rib.register", "rib.unregister", "rib.expired",
    "rib.face_removed_routes" and "rib.refused_full" in ``counters``.
    """

    def __init__(
        self,
        fib: Fib,
        *,
        max_routes: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        counters: Counter[str] | None = None,
    ) -> None:
        if max_routes < 0:
            raise ValueError("max_routes must be >= 0")
        self.max_routes = max_routes
        self._fib = fib
        self._clock = clock
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._entries = SortedDict()  # prefix -> list[Route] (never empty), sorted by face/origin
        self._by_face: dict[int, set[bytes]] = {}  # face -> prefixes with a route on it
        self._heap: list[tuple[float, bytes, int, int]] = []  # lazily pruned expiry queue
        self._routes = 0

    def register(self, prefix: bytes, route: Route) -> bool:
        """Add ``route`` under ``prefix``, or replace the route with its (face_id, origin).

        False (counted) when the route is new and ``max_routes`` are held, or when the FIB has
        no room for the prefix; the RIB is then unchanged.
        """
        prefix_depth(prefix)  # DecodeError on a malformed name value
        routes: list[Route] | None = self._entries.get(prefix)
        i = -1 if routes is None else _find(routes, route.face_id, route.origin)
        if i < 0 and self._routes >= self.max_routes:
            self._counters["rib.refused_full"] += 1
            return False
        route = replace(route)  # the caller's object may change; ours must not
        old = self._put(prefix, route)
        if not self._sync(prefix):  # the FIB had no room: nothing was written for this prefix
            if old is None:
                self._delete(prefix, face_id=route.face_id, origin=route.origin)
            else:
                self._put(prefix, old)
            self._counters["rib.refused_full"] += 1
            return False
        for below in self._descendants(prefix):
            self._sync(below)
        self._counters["rib.register"] += 1
        return True

    def unregister(self, prefix: bytes, face_id: int, origin: int) -> bool:
        """Remove the route of (face_id, origin) under ``prefix``; False if there is none."""
        if not self._delete(prefix, face_id=face_id, origin=origin):
            return False
        self._refresh([prefix])
        self._counters["rib.unregister"] += 1
        return True

    def remove_face(self, face_id: int) -> int:
        """Remove every route via a closed face; return how many.

        The forwarder may already have dropped the face from the FIB: recomputation only writes
        the difference against what the FIB holds now, so missing next hops are fine.
        """
        prefixes = self._by_face.get(face_id, set()).copy()
        removed = sum(self._delete(p, face_id=face_id) for p in prefixes)
        self._refresh(prefixes)
        if removed:
            self._counters["rib.face_removed_routes"] += removed
        return removed

    def expire(self, now: float | None = None) -> int:
        """Remove routes with ``expires_at`` <= ``now`` (default: the clock); return how many."""
        if now is None:
            now = self._clock()
        heap, removed = self._heap, 0
        changed: list[bytes] = []
        while heap and heap[0][0] <= now:
            at, prefix, face_id, origin = heapq.heappop(heap)
            if self._delete(prefix, face_id=face_id, origin=origin, at=at):
                changed.append(prefix)
                removed += 1
        self._refresh(changed)
        if removed:
            self._counters["rib.expired"] += removed
        return removed

    def next_expiry(self) -> float | None:
        """The earliest ``expires_at`` of the routes held, or None."""
        heap = self._heap
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def routes(self, prefix: bytes) -> list[Route]:
        """Copies of the routes of exactly ``prefix``, ordered by (face_id, origin)."""
        return [replace(r) for r in self._entries.get(prefix, ())]

    def __iter__(self) -> Iterator[tuple[bytes, list[Route]]]:
        """(prefix, route copies) in canonical order (byte order of name values), for rib/list."""
        return iter([(p, [replace(r) for r in rs]) for p, rs in self._entries.items()])

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def route_count(self) -> int:
        return self._routes

    def _put(self, prefix: bytes, route: Route) -> Route | None:
        """Store ``route``, returning the route it replaced (same face and origin) if any."""
        routes: list[Route] | None = self._entries.get(prefix)
        if routes is None:
            routes = self._entries[prefix] = []
        i = _find(routes, route.face_id, route.origin)
        old = None
        if i >= 0:
            old, routes[i] = routes[i], route
        else:
            routes.append(route)
            routes.sort(key=lambda r: (r.face_id, r.origin))
            self._routes += 1
        self._by_face.setdefault(route.face_id, set()).add(prefix)
        if route.expires_at is not None:
            heapq.heappush(self._heap, (route.expires_at, prefix, route.face_id, route.origin))
            if len(self._heap) > 2 * self._routes + 64:  # refreshes leave stale items behind
                self._heap = [item for item in self._heap if self._live(item)]
                heapq.heapify(self._heap)
        return old

    def _delete(
        self, prefix: bytes, face_id: int, origin: int | None = None, at: float | None = None
    ) -> int:
        """Remove the routes of ``face_id`` (and ``origin``, and expiring ``at``, when given)."""
        routes: list[Route] | None = self._entries.get(prefix)
        if routes is None:
            return 0
        kept = [
            r
            for r in routes
            if r.face_id != face_id
            or (origin is not None and r.origin != origin)
            or (at is not None and r.expires_at != at)
        ]
        removed = len(routes) - len(kept)
        if removed:
            self._routes -= removed
            if kept:
                self._entries[prefix] = kept
            else:
                del self._entries[prefix]
            if not any(r.face_id == face_id for r in kept):
                faces = self._by_face[face_id]
                faces.discard(prefix)
                if not faces:
                    del self._by_face[face_id]
        return removed

    def _live(self, item: tuple[float, bytes, int, int]) -> bool:
        at, prefix, face_id, origin = item
        routes: list[Route] = self._entries.get(prefix, [])
        i = _find(routes, face_id, origin)
        return i >= 0 and routes[i].expires_at == at

    def _nexthops(self, prefix: bytes) -> dict[int, int]:
        """face -> cost that the FIB entry of ``prefix`` should hold."""
        hops: dict[int, int] = {}
        if prefix not in self._entries:
            return hops
        for cut in reversed([0, *component_ends(prefix)]):  # the prefix, then ancestors upwards
            routes: list[Route] = self._entries.get(prefix[:cut], [])
            own = cut == len(prefix)
            for r in routes:
                if own or r.flags & ROUTE_CHILD_INHERIT:
                    hops[r.face_id] = min(r.cost, hops.get(r.face_id, r.cost))
            if any(r.flags & ROUTE_CAPTURE for r in routes):
                break  # a capturing entry's routes count, its ancestors' do not
        return hops

    def _sync(self, prefix: bytes) -> bool:
        """Make the FIB entry of ``prefix`` hold exactly the computed next hops.

        Adds come first, so the entry is only erased when nothing is left, and a refusal (the
        FIB is full and has no entry for ``prefix``) happens before anything was written.
        """
        want = self._nexthops(prefix)
        entry = self._fib.get(prefix)
        have = {} if entry is None else {nh.face_id: nh.cost for nh in entry.nexthops}
        for face_id, cost in want.items():
            if have.get(face_id) != cost and not self._fib.add_nexthop(prefix, face_id, cost):
                return False
        for face_id in have.keys() - want.keys():
            self._fib.remove_nexthop(prefix, face_id)
        return True

    def _refresh(self, changed: Iterable[bytes]) -> None:
        """Resynchronise the changed prefixes and all their RIB descendants, each once."""
        root: bytes | None = None
        for prefix in sorted(set(changed)):
            if root is None or not prefix.startswith(root):
                root = prefix
                self._sync(prefix)
                for below in self._descendants(prefix):
                    self._sync(below)
            elif prefix not in self._entries:
                self._sync(prefix)  # gone from the RIB, so the scan under ``root`` missed it

    def _descendants(self, prefix: bytes) -> Iterator[bytes]:
        """The RIB prefixes strictly under ``prefix``: one range scan of the sorted keys."""
        for below in self._entries.irange(minimum=prefix, inclusive=(False, True)):
            if not below.startswith(prefix):
                return
            yield below
