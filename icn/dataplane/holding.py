"""The holding table: Interests that arrive before their Data exists (docs/design.md section 4).

A producer that publishes on demand (collective chunks, stream batches, RMI results) holds such
an Interest's reply path under the key of the Data it waits for, up to the Interest's expiry,
and answers it when the Data is published.  The table is free of I/O: time is passed in, and
what to answer or what expired is returned, so one timer (armed at :meth:`next_expiry`) serves
a shell that must act on expiry, and none is needed by one that need not.

What to keep, and for how long, stays with each producer (rounds, reader positions, a TTL): the
table only holds.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterator, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
P = TypeVar("P", bound=Hashable)

# The expiry heap keeps entries already answered or dropped until they surface; it is rebuilt
# from the live entries once it holds this many more than twice them, so it stays bounded.
_HEAP_SLACK = 64


class HoldingTable(Generic[K, P]):
    """Reply paths (``P``) waiting for the Data of a key (``K``), at most ``max_entries``.

    A reply path is held once per key: a retransmitted Interest that comes back on the path it
    repeats (one PIT entry upstream) only extends the expiry, so the Data goes down that path
    once; a second answer would be dropped there as unsolicited.

    Counters: ``held`` (paths taken), ``duplicates`` (retransmissions merged into a held path),
    ``refused`` (the table was full), ``answered`` (paths returned by :meth:`publish`),
    ``expired`` (held past their expiry), ``dropped`` (let go by :meth:`drop` or :meth:`clear`).
    """

    __slots__ = (
        "_count",
        "_heap",
        "_keys",
        "_n",
        "answered",
        "dropped",
        "duplicates",
        "expired",
        "held",
        "max_entries",
        "refused",
    )

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._keys: dict[K, dict[P, float]] = {}
        self._n = 0  # paths held over all keys
        # (expiry, tie-breaker, key, path): the tie-breaker keeps keys and paths uncompared
        self._heap: list[tuple[float, int, K, P]] = []
        self._count = itertools.count()
        self.held = 0
        self.duplicates = 0
        self.refused = 0
        self.answered = 0
        self.expired = 0
        self.dropped = 0

    def __len__(self) -> int:
        """Reply paths held, over all keys."""
        return self._n

    def __contains__(self, key: object) -> bool:
        """Whether some path waits for ``key``."""
        return key in self._keys

    def __iter__(self) -> Iterator[K]:
        """The keys something waits for (copy them before dropping while iterating)."""
        return iter(self._keys)

    def hold(self, key: K, path: P, expiry: float, now: float) -> bool:
        """Hold ``path`` for ``key`` until ``expiry``; False if refused (the table is full).

        An Interest already expired is not held (nothing could answer it in time): counted
        as expired, not refused."""
        if expiry <= now:
            self.expired += 1
            return True
        paths = self._keys.get(key)
        if paths is not None:
            old = paths.get(path)
            if old is not None:
                if old > now:
                    self.duplicates += 1
                    if expiry <= old:
                        return True
                else:  # the first one expired unanswered; this one starts afresh
                    self.expired += 1
                    self.held += 1
                paths[path] = expiry
                self._push(expiry, key, path)
                return True
        n = self._n
        if n >= self.max_entries:
            self.refused += 1
            return False
        if paths is None:
            self._keys[key] = {path: expiry}
        else:
            paths[path] = expiry
        self._n = n + 1
        self.held += 1
        self._push(expiry, key, path)
        return True

    def publish(self, key: K, now: float) -> Sequence[P]:
        """The Data of ``key`` exists: the paths to answer, each once; the table lets them go
        (and those already expired, counted)."""
        paths = self._keys.pop(key, None)
        if paths is None:
            return ()
        n = len(paths)
        self._n -= n
        if n == 1:  # the usual case, without building a list
            ((path, expiry),) = paths.items()
            if expiry > now:
                self.answered += 1
                return (path,)
            self.expired += 1
            return ()
        live = [path for path, expiry in paths.items() if expiry > now]
        self.answered += len(live)
        self.expired += n - len(live)
        return live

    def expire(self, now: float) -> Sequence[tuple[K, P]]:
        """Let go of every path held past its expiry; returns them, for a shell that answers
        them in some other way (an RMI poll gets a new estimate)."""
        heap = self._heap
        if not heap or heap[0][0] > now:
            return ()
        gone: list[tuple[K, P]] = []
        keys = self._keys
        while heap and heap[0][0] <= now:
            expiry, _, key, path = heapq.heappop(heap)
            paths = keys.get(key)
            if paths is None or paths.get(path) != expiry:
                continue  # answered, dropped, or held on with a later expiry
            del paths[path]
            if not paths:
                del keys[key]
            self._n -= 1
            gone.append((key, path))
        self.expired += len(gone)
        return gone

    def next_expiry(self) -> float | None:
        """When the first held path expires (None: nothing held), to arm one timer."""
        heap = self._heap
        keys = self._keys
        while heap:
            expiry, _, key, path = heap[0]
            paths = keys.get(key)
            if paths is not None and paths.get(path) == expiry:
                return expiry
            heapq.heappop(heap)  # stale: answered, dropped or extended since
        return None

    def drop(self, key: K) -> int:
        """Let go of what waits for ``key`` unanswered (its Data will never be published);
        returns how many paths."""
        paths = self._keys.pop(key, None)
        if paths is None:
            return 0
        self._n -= len(paths)
        self.dropped += len(paths)
        return len(paths)

    def clear(self) -> None:
        self.dropped += self._n
        self._keys.clear()
        self._heap.clear()
        self._n = 0

    def _push(self, expiry: float, key: K, path: P) -> None:
        heap = self._heap
        heapq.heappush(heap, (expiry, next(self._count), key, path))
        if len(heap) > 2 * self._n + _HEAP_SLACK:
            # entries answered or dropped pile up behind a long-lived one: start again
            count = self._count
            heap[:] = [
                (exp, next(count), k, p)
                for k, paths in self._keys.items()
                for p, exp in paths.items()
            ]
            heapq.heapify(heap)
