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


# metric -> process -> [(seconds since the run's start, value)], in time order
Series = dict[str, dict[str, list[tuple[float, float]]]]


def metric_series(
    records: Mapping[str, Sequence[Mapping[str, Any]]], processes: Iterable[str], t0: float
) -> Series:
    """Every value each process reported, per metric, in time (seconds since ``t0``)."""
    out: Series = {}
    for name in processes:
        for r in records.get(name, []):
            if not is_metric(r):
                continue
            try:
                metric, t, value = str(r["metric"]), float(r["t"]) - t0, float(r["value"])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(value) and math.isfinite(t):
                out.setdefault(metric, {}).setdefault(name, []).append((t, value))
    for per_process in out.values():
        for points in per_process.values():
            points.sort(key=lambda p: p[0])
    return out


def value_at(points: Sequence[tuple[float, float]], t: float) -> float:
    """The last value reported at or before ``t`` (0 before the first: a running total starts
    at 0)."""
    value = 0.0
    for when, v in points:
        if when > t:
            break
        value = v
    return value


def increase(points: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """How much a running total grew from ``start`` to ``end`` (never below 0: a restarted
    process counts from 0 again)."""
    return max(0.0, value_at(points, end) - value_at(points, start))


def timelines(
    series: Series, names: Iterable[str], interval: float, duration: float
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """For each metric in ``names``: per process, its increase in each ``interval`` of the run
    (``count``) and per second (``per_s``), buckets starting at ``t``."""
    out: dict[str, dict[str, list[dict[str, float]]]] = {}
    if interval <= 0 or duration <= 0:
        return out
    n = max(1, math.ceil(duration / interval - 1e-9))
    for metric in names:
        per_process = series.get(metric, {})
        out[metric] = {}
        for process, points in sorted(per_process.items()):
            rows = []
            for i in range(n):
                start = i * interval
                end = min(duration, start + interval)
                count = increase(points, start, end)
                rows.append({"t": start, "count": count, "per_s": count / (end - start)})
            out[metric][process] = rows
    return out


def check_share(
    exp: Expectation, criterion: str, series: Series, end: float
) -> tuple[float | None, bool, str]:
    """``(actual, passed, text)`` for ``max_share`` or ``min_share``: ``exp.process``'s part
    of the metric's increase over every process reporting it, from ``exp.since`` to ``end``."""
    assert exp.metric is not None and exp.process is not None
    expected = float(getattr(exp, criterion))
    per_process = series.get(exp.metric, {})
    if exp.process not in per_process:
        return None, False, f"{exp.process} reported no metric {exp.metric}"
    mine = increase(per_process[exp.process], exp.since, end)
    total = sum(increase(points, exp.since, end) for points in per_process.values())
    span = f"from {exp.since:g}s to {end:g}s"
    if total <= 0:
        return None, False, f"no process's {exp.metric} grew {span}"
    actual = mine / total
    ok = actual <= expected if criterion == "max_share" else actual >= expected
    sign = ("<=" if ok else ">") if criterion == "max_share" else (">=" if ok else "<")
    return (
        actual,
        ok,
        f"{exp.process}'s share of {exp.metric} {span}: {actual * 100:.3g}% ({_num(mine)} of "
        f"{_num(total)}) {sign} {expected * 100:.3g}%",
    )


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
