"""Per-function call outcomes and durations an RMI server keeps for its metrics.

Plain integers and a fixed set of buckets, counted when a call finishes (a call costs far more
than these few additions); :mod:`compute.rmi.metrics` reads them when Prometheus scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

# seconds: from a memo-fast call to a long job (Prometheus' default buckets, and 30 s, 60 s)
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class FunctionStats:
    """One function's finished calls: counts by outcome, and a duration histogram."""

    ok: int = 0
    failed: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total_seconds: float = 0.0

    def add(self, ok: bool, seconds: float) -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        self.buckets[bisect_left(BUCKETS, seconds)] += 1
        self.total_seconds += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus' histogram buckets: (upper bound, calls at or below it), +Inf last."""
        out, running = [], 0
        for bound, n in zip((*BUCKETS, float("inf")), self.buckets, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


@dataclass
class CallStats:
    """Every function's :class:`FunctionStats`, by name (the functions a server registered:
    a bounded set)."""

    functions: dict[str, FunctionStats] = field(default_factory=dict)

    def finished(self, function: str, ok: bool, seconds: float) -> None:
        stats = self.functions.get(function)
        if stats is None:
            stats = self.functions[function] = FunctionStats()
        stats.add(ok, seconds)
