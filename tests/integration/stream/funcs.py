"""Functions the test graphs name.  Integer values keep window sums exact in any order, so a
reference computed straight from the input compares equal bit for bit."""

from __future__ import annotations

from typing import Any

KEYS = 7


def reading(i: int) -> dict[str, Any]:
    return {"i": i, "sensor": f"s{i % KEYS}", "value": (i * 37) % 101}


def double(reading: dict[str, Any]) -> dict[str, Any]:
    return {**reading, "value": reading["value"] * 2}


def expected(count: int, events_per_second: float) -> list[tuple[int, str, dict[str, Any]]]:
    """(t, key, value) of every record after ``double``, in generation order."""
    out = []
    for i in range(count):
        v = double(reading(i))
        out.append((int(i * 1000 / events_per_second), v["sensor"], v))
    return out


def window_means(
    count: int, events_per_second: float, size_ms: int
) -> dict[tuple[str, int], float]:
    """(sensor, window start) -> mean of value, computed directly from the input."""
    sums: dict[tuple[str, int], list[int]] = {}
    for t, key, v in expected(count, events_per_second):
        acc = sums.setdefault((key, t - t % size_ms), [0, 0])
        acc[0] += v["value"]
        acc[1] += 1
    return {k: s / n for k, (s, n) in sums.items()}
