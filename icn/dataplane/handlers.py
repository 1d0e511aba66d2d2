"""The app's prefix -> handler table: which code answers an arriving Interest (docs/design.md
section 4).

An Interest goes to the handler of the longest prefix of its name in the table, as a FIB
chooses a route.  Prefixes are name values (:mod:`icn.wire.name`), so a prefix of k components
is a slice of the Interest's name; the table keeps the distinct prefix depths, longest first,
and tries only those.  Free of I/O: calling the handler, and what it returns, is the caller's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

from icn.wire.encode import Outgoing
from icn.wire.name import NameLike, as_name, component_ends
from icn.wire.packet import InterestView

# Sends one Data packet: its wire, or its DataParts (a large content is then not copied).
Reply = Callable[[Outgoing], None]
# Gets the Interest and a reply function to call with a Data wire, at once or later; an async
# handler (an awaitable returned) gets a task of its own.
Handler = Callable[[InterestView, Reply], Awaitable[None] | None]


class HandlerTable:
    """Handlers by prefix, with longest-prefix :meth:`lookup`."""

    __slots__ = ("_by_prefix", "_depth_count", "_depths")

    def __init__(self) -> None:
        self._by_prefix: dict[bytes, tuple[Handler, int]] = {}  # prefix -> (handler, depth)
        # handlers per prefix depth: a handler comes and goes without rescanning the others
        # (an RMI client adds and removes one per call; 64 calls in flight made a rescan its
        # top cost)
        self._depth_count: Counter[int] = Counter()
        self._depths: list[int] = []  # the depths present, longest first

    def __len__(self) -> int:
        return len(self._by_prefix)

    def __contains__(self, prefix: NameLike) -> bool:
        return as_name(prefix) in self._by_prefix

    def get(self, prefix: NameLike) -> Handler | None:
        """The handler installed for exactly ``prefix``."""
        entry = self._by_prefix.get(as_name(prefix))
        return None if entry is None else entry[0]

    def add(self, prefix: NameLike, handler: Handler) -> Handler | None:
        """Dispatch Interests under ``prefix`` to ``handler``; returns the handler it replaces."""
        value = as_name(prefix)
        previous = self.remove(value)
        depth = len(component_ends(value))
        self._by_prefix[value] = (handler, depth)
        self._depth_count[depth] += 1
        if self._depth_count[depth] == 1:
            self._depths = sorted([*self._depths, depth], reverse=True)
        return previous

    def remove(self, prefix: NameLike) -> Handler | None:
        """Stop dispatching ``prefix`` (nothing if it was not there); returns its handler."""
        entry = self._by_prefix.pop(as_name(prefix), None)
        if entry is None:
            return None
        depth = entry[1]
        self._depth_count[depth] -= 1
        if not self._depth_count[depth]:
            del self._depth_count[depth]
            self._depths.remove(depth)
        return entry[0]

    def lookup(self, name: bytes, ends: list[int]) -> Handler | None:
        """The handler of the longest prefix of ``name`` (its component ends ``ends``)."""
        by_prefix = self._by_prefix
        n = len(ends)
        for depth in self._depths:
            if depth <= n:
                entry = by_prefix.get(name[: ends[depth - 1]] if depth else b"")
                if entry is not None:
                    return entry[0]
        return None

    def depths(self) -> list[int]:
        """The prefix depths present, longest first (what :meth:`lookup` tries)."""
        return list(self._depths)
