"""Metrics that services and workloads report with ``ctx.metric(name, value)``.

They share the results files with a workload's operation records, one JSON line each:
``{"t": unix time, "metric": name, "value": v}``.  A metric is a running total (``bytes_resent``)
or a level reported from time to time, so what counts is the last value each process reported;
the report lists it per process and sums it per metric name over the processes.  Pure functions,
like :mod:`apps.scenario.report`, which calls them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apps.scenario.schema import Expectation


def is_metric(row: Mapping[str, Any]) -> bool:
    return "metric" in row


def operations(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A results file's operation records (what ``ctx.record`` wrote), metrics and invariant
    checks (``ctx.check``) left out."""
    return [dict(r) for r in rows if not is_metric(r) and "check" not in r]


def last_values(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Metric name -> the value of its latest line (by ``t``; file order breaks ties)."""
    latest: dict[str, tuple[float, float]] = {}
    for r in rows:
        if not is_metric(r):
            continue
        try:
            name, t, value = str(r["metric"]), float(r.get("t") or 0.0), float(r["value"])
        except (KeyError, TypeError, ValueError):
            continue
        if not math.isfinite(value):
            continue
        if name not in latest or t >= latest[name][0]:
            latest[name] = (t, value)
    return {name: v for name, (_, v) in sorted(latest.items())}


def metric_stats(
    records: Mapping[str, Sequence[Mapping[str, Any]]], processes: Iterable[str]
) -> dict[str, Any]:
    """``{"processes": {process: {metric: last value}}, "totals": {metric: sum}}`` over the
    named ``processes`` (those that reported nothing are left out)."""
    per_process: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = {}
    for name in processes:
        values = last_values(records.get(name, []))
        if not values:
            continue
        per_process[name] = values
        for metric, v in values.items():
            totals[metric] = totals.get(metric, 0.0) + v
    return {"processes": per_process, "totals": dict(sorted(totals.items()))}


def _num(x: float) -> str:
    return f"{x:,.6g}" if abs(x) < 1e15 else f"{x:.6g}"


def check_metric(
    exp: Expectation, criterion: str, stats: Mapping[str, Any]
) -> tuple[float | None, bool, str]:
    """``(actual, passed, text)`` for the ``min`` or ``max`` of a metric expectation."""
    assert exp.metric is not None
    expected = float(getattr(exp, criterion))
    if exp.process is not None:
        actual = (stats.get("processes") or {}).get(exp.process, {}).get(exp.metric)
        what = f"{exp.metric} of {exp.process}"
        missing = f"{exp.process} reported no metric {exp.metric}"
    else:
        actual = (stats.get("totals") or {}).get(exp.metric)
        what = f"total {exp.metric}"
        missing = f"no service or workload reported metric {exp.metric}"
    if actual is None:
        return None, False, missing
    if criterion == "min":
        ok = actual >= expected
        return actual, ok, f"{what} {_num(actual)} {'>=' if ok else '<'} {_num(expected)}"
    ok = actual <= expected
    return actual, ok, f"{what} {_num(actual)} {'<=' if ok else '>'} {_num(expected)}"
