"""Strategy choice: which forwarding strategy handles the names under a prefix.

A prefix -> strategy map answered by longest-prefix match, like the FIB (and sharing its lookup),
except that the root prefix ``/`` always has a choice, so every name finds one.  Generic in the
strategy type so this table does not depend on ``fw/``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Generic, TypeVar

from forwarder.table.fib import PrefixDepths, longest_prefix, prefix_depth

S = TypeVar("S")


class StrategyChoice(Generic[S]):
    """Prefix -> strategy, bounded by ``max_entries`` prefixes (the root included).

    Counts "strategy_choice.refused_full" for a new prefix refused at the cap.
    """

    __slots__ = ("_counters", "_depths", "_table", "max_entries")

    def __init__(
        self, default: S, max_entries: int = 1_000, counters: Counter[str] | None = None
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1: the root prefix always has a strategy")
        self.max_entries = max_entries
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._table: dict[bytes, S] = {b"": default}
        self._depths = PrefixDepths()
        self._depths.add(0)

    def set(self, prefix: bytes, strategy: S) -> bool:
        """Choose ``strategy`` for ``prefix`` (replacing any choice).  False (counted) when full."""
        if prefix not in self._table:
            if len(self._table) >= self.max_entries:
                self._counters["strategy_choice.refused_full"] += 1
                return False
            self._depths.add(prefix_depth(prefix))
        self._table[prefix] = strategy
        return True

    def unset(self, prefix: bytes) -> bool:
        """Drop the choice of ``prefix`` so it inherits its parent's.  The root cannot be unset."""
        if not prefix or prefix not in self._table:
            return False
        del self._table[prefix]
        self._depths.remove(prefix_depth(prefix))
        return True

    def find(self, name: bytes, name_ends: list[int]) -> S:
        """The strategy of the longest prefix of ``name`` with a choice (the root at worst)."""
        found = longest_prefix(self._table, self._depths.order, name, name_ends)
        return self._table[b""] if found is None else found

    def get(self, prefix: bytes) -> S | None:
        """The strategy chosen for exactly ``prefix``, or None if it inherits."""
        return self._table.get(prefix)

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[tuple[bytes, S]]:
        """(prefix, strategy) in canonical prefix order, for strategy-choice/list."""
        table = self._table
        return iter([(p, table[p]) for p in sorted(table)])
