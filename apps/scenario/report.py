"""What a scenario run showed: statistics, expectation checks, a console summary and files.

Pure functions over what the runner collected (no processes, no sockets):

* ``records``: per workload, one dict per operation (``t`` and ``sent`` unix times, ``ok``,
  ``latency`` seconds, ``bytes``, ``error``);
* ``samples``: node and link counters sampled every ``report.interval`` seconds (``t`` relative
  to the run start); a node is ``None`` while it is down, and its counters restart from 0 when
  it comes back;
* ``faults`` (``at`` planned, ``applied`` actual, relative seconds) and ``route_events``.

:func:`build_report` turns them into one JSON-ready dict; ``summary.render_summary`` prints it
with rich and :func:`write_report` writes ``report.json`` and the plots (``plots``).

Counters are cumulative, so totals are sums of increments between samples.  The first sample is
the baseline (traffic before the run started is not counted); a counter that first shows up in a
later sample (its node started late) counts in full.  A decrease, or its node having been down
or having restarted since the previous value, means the counter was reset: the new value is the
increment since the reset.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from apps.scenario.app_metrics import (
    Series,
    check_metric,
    check_share,
    metric_series,
    metric_stats,
    operations,
    timelines,
)
from apps.scenario.invariants import check_invariants, check_stats
from apps.scenario.schema import (
    METRIC_CRITERIA,
    SHARE_CRITERIA,
    WORKLOAD_CRITERIA,
    Expectation,
    Scenario,
    WorkloadSpec,
)
from apps.scenario.tracers import app_delay_table, cs_table, face_table

# node counters that are sizes (gauges), not cumulative counts: no totals, no reset detection
GAUGE_SUFFIX = "_entries"
TOP_ERRORS = 10
DISRUPTIVE = ("kill", "cut")


# ---------------------------------------------------------------------------------- helpers


def _num(x: Any) -> float | None:
    """A plain finite float, or None (numpy scalars, NaN and inf never reach the JSON)."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def _percentiles_ms(latencies_s: Sequence[float], qs: Sequence[int]) -> list[float | None]:
    if not latencies_s:
        return [None for _ in qs]
    arr = np.asarray(latencies_s, dtype=float) * 1000.0
    return [_num(np.percentile(arr, q, method="linear")) for q in qs]


def _latency(rec: Mapping[str, Any]) -> float | None:
    lat = rec.get("latency")
    if lat is None and rec.get("t") is not None and rec.get("sent") is not None:
        lat = rec["t"] - rec["sent"]
    return _num(lat)


def fault_text(fault: Mapping[str, Any]) -> str:
    """``kill b``, ``cut a-b``, ``kill service agg-b`` (``kind``: what a kill names)."""
    target = fault.get("target")
    if isinstance(target, list | tuple):
        target = "-".join(str(t) for t in target)
    kind = fault.get("kind")
    if kind in ("service", "workload"):
        target = f"{kind} {target}"
    return f"{fault.get('action')} {target}"


def fault_kind(fault: Mapping[str, Any]) -> str:
    """What a fault does, without its target: ``kill node``, ``restart service``, ``cut
    link``, ``shape link``."""
    return f"{fault.get('action')} {fault.get('kind') or 'link'}"


def fault_counts(faults: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per kind of fault (:func:`fault_kind`, in order of first appearance): how many were
    planned, applied and failed (an error instead of the fault)."""
    counts: dict[str, dict[str, Any]] = {}
    for f in faults:
        kind = fault_kind(f)
        c = counts.setdefault(kind, {"fault": kind, "planned": 0, "applied": 0, "failed": 0})
        c["planned"] += 1
        if f.get("error"):
            c["failed"] += 1
        elif f.get("applied") is not None:
            c["applied"] += 1
    return list(counts.values())


def _is_disruptive(fault: Mapping[str, Any]) -> bool:
    return bool(fault.get("disruptive", fault.get("action") in DISRUPTIVE))


def _active_span(spec: WorkloadSpec, run_duration: float) -> tuple[float, float]:
    start = spec.start
    end = run_duration if spec.duration is None else min(start + spec.duration, run_duration)
    return start, max(start, end)


def _plain(x: Any) -> Any:
    """A JSON-ready copy: dicts, lists, str, int, finite float, bool, None (others become str)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set):
        return [_plain(v) for v in x]
    if x is None or isinstance(x, bool | str | int):
        return x
    if isinstance(x, float | np.floating):
        return _num(x)
    if isinstance(x, np.integer):
        return int(x)
    return str(x)


# ---------------------------------------------------------------------------------- workloads


def workload_stats(
    spec: WorkloadSpec,
    records: list[dict[str, Any]],
    t0: float,
    run_duration: float,
    interval: float,
    faults: list[dict[str, Any]],
) -> dict[str, Any]:
    """Counts, throughput, latency percentiles, errors, a timeline and recovery after faults.

    Throughput is successes per second over the workload's active span (``start`` to
    ``start + duration``, cut at the end of the run).  Timeline buckets are ``interval`` wide
    over that span (the last one may be shorter; its throughput uses its own width), records
    are placed by completion time, and a record completing outside the span falls into the
    first or last bucket.  Recovery is measured for each kill or cut applied (without error)
    inside the span: the time from the fault to the first completion of a success sent after it.
    """
    start, end = _active_span(spec, run_duration)
    span = end - start
    ok_recs = [r for r in records if r.get("ok")]
    failed = [r for r in records if not r.get("ok")]
    lats = [lat for r in ok_recs if (lat := _latency(r)) is not None]
    p50, p90, p99 = _percentiles_ms(lats, (50, 90, 99))
    errors = Counter(str(r.get("error") or "unknown error") for r in failed)

    timeline: list[dict[str, Any]] = []
    if span > 0 and interval > 0:
        n = max(1, math.ceil(span / interval - 1e-9))
        ok_n, fail_n = [0] * n, [0] * n
        bucket_lats: list[list[float]] = [[] for _ in range(n)]
        for r in records:
            i = min(n - 1, max(0, math.floor((float(r["t"]) - t0 - start) / interval)))
            if r.get("ok"):
                ok_n[i] += 1
                if (lat := _latency(r)) is not None:
                    bucket_lats[i].append(lat)
            else:
                fail_n[i] += 1
        for i in range(n):
            b_start = start + i * interval
            width = min(interval, end - b_start)
            b50, b99 = _percentiles_ms(bucket_lats[i], (50, 99))
            timeline.append(
                {
                    "t": b_start,
                    "ok": ok_n[i],
                    "failed": fail_n[i],
                    "throughput": ok_n[i] / width if width > 0 else 0.0,
                    "p50_ms": b50,
                    "p99_ms": b99,
                }
            )

    recovery: list[dict[str, Any]] = []
    for f in faults:
        applied = f.get("applied")
        if not _is_disruptive(f) or applied is None or f.get("error"):
            continue
        if not start <= applied < end:
            continue
        after = [
            float(r["t"]) - t0 - applied
            for r in ok_recs
            if r.get("sent") is not None and float(r["sent"]) - t0 >= applied
        ]
        recovery.append(
            {"fault": fault_text(f), "at": applied, "recovery_s": min(after) if after else None}
        )

    return {
        "node": spec.node,
        # what the scenario asked this workload to report: the summary and plots show only that
        "reports": list(spec.report),
        "active": {"start": start, "end": end},
        "interval": interval,
        "requests": len(records),
        "ok": len(ok_recs),
        "failed": len(failed),
        "success_ratio": len(ok_recs) / len(records) if records else None,
        "throughput": len(ok_recs) / span if span > 0 else None,
        "bytes": sum(int(r.get("bytes") or 0) for r in ok_recs),
        "latency_ms": {
            "p50": p50,
            "p90": p90,
            "p99": p99,
            "max": _num(max(lats) * 1000.0) if lats else None,
            "mean": _num(sum(lats) / len(lats) * 1000.0) if lats else None,
        },
        "errors": dict(errors.most_common(TOP_ERRORS)),
        "timeline": timeline,
        "recovery": recovery,
    }


# ---------------------------------------------------------------------------------- counters


def _increments(
    values: Sequence[int | None], reset_at: Sequence[bool]
) -> list[tuple[int, int] | None]:
    """Per sample, ``(increment, index of the previous value or -1)``, None where missing.

    ``reset_at[j]`` says the counter's node was down or restarted at sample ``j``; such a sample
    between two values (or at the second) means the second counts from 0.
    """
    out: list[tuple[int, int] | None] = [None] * len(values)
    prev: int | None = None
    prev_i = -1
    for i, v in enumerate(values):
        if v is None:
            continue
        if prev is None:
            inc = 0 if i == 0 else v
        elif v < prev or any(reset_at[prev_i + 1 : i + 1]):
            inc = v
        else:
            inc = v - prev
        out[i] = (inc, prev_i)
        prev, prev_i = v, i
    return out


def _node_resets(samples: Sequence[Mapping[str, Any]], node: str) -> tuple[list[bool], list[bool]]:
    """Per sample: is the node down, and has it restarted since its previous up sample (a gap
    while down, or a cumulative counter going down)."""
    down: list[bool] = []
    reset: list[bool] = []
    last: Mapping[str, Any] | None = None
    gap = False
    for s in samples:
        counters = (s.get("nodes") or {}).get(node)
        down.append(counters is None)
        if counters is None:
            reset.append(False)
            gap = gap or last is not None
            continue
        restarted = last is not None and (
            gap
            or any(
                isinstance(v, int) and isinstance(last.get(k), int) and v < last[k]
                for k, v in counters.items()
                if not k.endswith(GAUGE_SUFFIX)
            )
        )
        reset.append(restarted)
        last, gap = counters, False
    return down, reset


def _sorted_samples(samples: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(samples, key=lambda s: float(s.get("t", 0.0)))


def _directions(link: str, samples: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The two nodes of ``a-b`` in order; node names may hold '-', so the samples' direction
    keys (``a>b``) decide where the name splits, falling back to the first '-'."""
    for s in samples:
        for key in (s.get("links") or {}).get(link) or {}:
            x, _, y = key.partition(">")
            if f"{x}-{y}" == link:
                return x, y
            if f"{y}-{x}" == link:
                return y, x
    a, _, b = link.partition("-")
    return a, b


def link_stats(samples: list[dict[str, Any]], link_names: list[str]) -> dict[str, dict[str, Any]]:
    """Per link: ``{"a>b": {"bytes", "packets", "dropped"}, "b>a": {...}, "total_bytes",
    "dropped": {"a>b": n, "b>a": n}, "timeline"}``.

    The timeline has one entry per sample, ``{"t", "a>b_bytes_per_s", "b>a_bytes_per_s"}``, the
    rate since the previous value of that direction (None at the first sample and while the
    direction is missing).
    """
    ordered = _sorted_samples(samples)
    times = [float(s.get("t", 0.0)) for s in ordered]
    node_flags: dict[str, list[bool]] = {}

    def reset_flags(node: str) -> list[bool]:
        if node not in node_flags:
            down, reset = _node_resets(ordered, node)
            node_flags[node] = [d or r for d, r in zip(down, reset, strict=True)]
        return node_flags[node]

    out: dict[str, dict[str, Any]] = {}
    for link in link_names:
        a, b = _directions(link, ordered)
        entry: dict[str, Any] = {}
        timeline: list[dict[str, Any]] = [{"t": t} for t in times]
        for sender, receiver in ((a, b), (b, a)):
            key = f"{sender}>{receiver}"
            cells = [((s.get("links") or {}).get(link) or {}).get(key) for s in ordered]
            flags = reset_flags(sender)
            totals = {}
            for field in ("bytes", "packets", "dropped"):
                values = [None if c is None else int(c.get(field, 0)) for c in cells]
                incs = _increments(values, flags)
                totals[field] = sum(x[0] for x in incs if x is not None)
                if field == "bytes":
                    for i, x in enumerate(incs):
                        rate = None
                        if x is not None and i > 0:
                            since = times[x[1] if x[1] >= 0 else i - 1]
                            dt = times[i] - since
                            rate = x[0] / dt if dt > 0 else None
                        timeline[i][f"{key}_bytes_per_s"] = rate
            entry[key] = totals
        entry["total_bytes"] = entry[f"{a}>{b}"]["bytes"] + entry[f"{b}>{a}"]["bytes"]
        # packets the link emulation (the sending face's shaper) dropped, per direction
        entry["dropped"] = {k: entry[k]["dropped"] for k in (f"{a}>{b}", f"{b}>{a}")}
        entry["timeline"] = timeline
        out[link] = entry
    return out


def node_stats(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per node: ``{"counters": last counters seen (None if never up), "totals": increments of
    the cumulative counters over the run (resets handled), "restarts", "down_samples"}``.

    A restart is a return from down (a ``None`` sample) or a cumulative counter going down
    between two samples (a restart faster than the sampling).
    """
    ordered = _sorted_samples(samples)
    names: list[str] = []
    for s in ordered:
        for name in s.get("nodes") or {}:
            if name not in names:
                names.append(name)
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        down, reset = _node_resets(ordered, name)
        flags = [d or r for d, r in zip(down, reset, strict=True)]
        series = [(s.get("nodes") or {}).get(name) for s in ordered]
        last = next((c for c in reversed(series) if c is not None), None)
        keys: list[str] = []
        for c in series:
            for k, v in (c or {}).items():
                if k not in keys and isinstance(v, int) and not k.endswith(GAUGE_SUFFIX):
                    keys.append(k)
        totals = {}
        for k in keys:
            values = [None if c is None else c.get(k) for c in series]
            values = [v if isinstance(v, int) else None for v in values]
            totals[k] = sum(x[0] for x in _increments(values, flags) if x is not None)
        out[name] = {
            "counters": dict(last) if last is not None else None,
            "totals": totals,
            "restarts": sum(reset),
            "down_samples": sum(down),
        }
    return out


# ---------------------------------------------------------------------------------- checks


def pct(x: float) -> str:
    return f"{x * 100:.4g}%"


def secs(x: float) -> str:
    return f"{x * 1000:.4g}ms" if x < 1 else f"{x:.4g}s"


def _p99_ratio(
    exp: Expectation, stats: Mapping[str, Any], base: Mapping[str, Any] | None
) -> tuple[float | None, bool, str]:
    """``max_p99_ratio``: this workload's p99 latency over the baseline's (a ratio, so a
    slower machine moves both)."""
    p99 = (stats.get("latency_ms") or {}).get("p99")
    base_p99 = ((base or {}).get("latency_ms") or {}).get("p99")
    if p99 is None or base_p99 is None or base_p99 <= 0:
        who = exp.workload if p99 is None else exp.baseline
        return None, False, f"no p99 latency for {who} (no successful requests)"
    actual = p99 / base_p99
    expected = float(exp.max_p99_ratio or 0.0)
    ok = actual <= expected
    return (
        actual,
        ok,
        f"p99 {p99:.4g}ms / {exp.baseline}'s {base_p99:.4g}ms = {actual:.3g} "
        f"{'<=' if ok else '>'} {expected:.3g} ({1 / actual if actual else math.inf:.3g}x lower)",
    )


def _check(
    workload: str, criterion: str, expected: float, stats: Mapping[str, Any] | None
) -> tuple[float | None, bool, str]:
    if stats is None:
        return None, False, f"no results for workload {workload}"
    if criterion == "min_success_ratio":
        actual = stats.get("success_ratio")
        if actual is None:
            return None, False, "no requests were made, so no success ratio"
        ok = actual >= expected
        return actual, ok, f"success ratio {pct(actual)} {'>=' if ok else '<'} {pct(expected)}"
    if criterion == "max_p99_latency":
        p99 = (stats.get("latency_ms") or {}).get("p99")
        if p99 is None:
            return None, False, "no successful requests, so no p99 latency"
        actual = p99 / 1000.0
        ok = actual <= expected
        return actual, ok, f"p99 latency {secs(actual)} {'<=' if ok else '>'} {secs(expected)}"
    if criterion == "min_throughput":
        actual = stats.get("throughput")
        if actual is None:
            return None, False, "the workload had no active time, so no throughput"
        ok = actual >= expected
        return actual, ok, f"throughput {actual:.4g}/s {'>=' if ok else '<'} {expected:.4g}/s"
    # max_recovery
    recovery = stats.get("recovery") or []
    if not recovery:
        span = stats.get("active") or {}
        where = f" ({span.get('start', 0):g}s to {span.get('end', 0):g}s)" if span else ""
        return (
            None,
            False,
            f"no kill or cut was applied while {workload} ran{where}, so recovery was not "
            "measured; add the fault or drop max_recovery",
        )
    never = [r for r in recovery if r.get("recovery_s") is None]
    if never:
        r = never[0]
        return None, False, f"never recovered after {r['fault']} at {r['at']:.3g}s"
    worst = max(recovery, key=lambda r: r["recovery_s"])
    actual = worst["recovery_s"]
    ok = actual <= expected
    return (
        actual,
        ok,
        f"worst recovery {secs(actual)} after {worst['fault']} "
        f"{'<=' if ok else '>'} {secs(expected)}",
    )


CRITERIA = WORKLOAD_CRITERIA


def check_expectations(
    scenario: Scenario,
    workloads: dict[str, dict[str, Any]],
    metrics: Mapping[str, Any] | None = None,
    series: Series | None = None,
    end: float | None = None,
) -> list[dict[str, Any]]:
    """One result per criterion set on each ``report.expect`` entry, in file order.
    ``metrics`` is the report's ``metrics`` section (:func:`app_metrics.metric_stats`),
    ``series`` every metric value in time (:func:`app_metrics.metric_series`) and ``end`` the
    end of the run, for the share criteria."""
    results: list[dict[str, Any]] = []
    for exp in scenario.report.expect:
        criteria = METRIC_CRITERIA if exp.metric is not None else WORKLOAD_CRITERIA
        for criterion in criteria:
            expected = getattr(exp, criterion)
            if expected is None:
                continue
            if exp.workload is not None and criterion == "max_p99_ratio":
                stats = workloads.get(exp.workload)
                if stats is None:
                    actual, passed, text = None, False, f"no results for workload {exp.workload}"
                else:
                    base = workloads.get(exp.baseline or "")
                    actual, passed, text = _p99_ratio(exp, stats, base)
            elif exp.workload is not None:
                actual, passed, text = _check(
                    exp.workload, criterion, expected, workloads.get(exp.workload)
                )
            elif criterion in SHARE_CRITERIA:
                run_end = scenario.duration if end is None else end
                actual, passed, text = check_share(exp, criterion, series or {}, run_end)
            else:
                actual, passed, text = check_metric(exp, criterion, metrics or {})
            results.append(
                {
                    "subject": exp.subject,
                    "workload": exp.workload,
                    "metric": exp.metric,
                    "process": exp.process,
                    "criterion": criterion,
                    "expected": expected,
                    "actual": _num(actual),
                    "passed": bool(passed),
                    "text": text,
                }
            )
    return results


# ---------------------------------------------------------------------------------- report


def build_report(
    scenario: Scenario,
    t0: float,
    records: dict[str, list[dict[str, Any]]],
    samples: list[dict[str, Any]],
    faults: list[dict[str, Any]],
    route_events: list[dict[str, Any]],
    meta: dict[str, Any],
    ran_for: float | None = None,
) -> dict[str, Any]:
    """The whole run as one JSON-ready dict (see the module docstring for the inputs).

    ``ran_for``: how long the run went on, when it ended before ``scenario.duration``
    (``stop_when_done``); workloads' rates are over what they had of it.

    ``records`` holds each service's and workload's results file: operation records and
    metric lines (:mod:`apps.scenario.app_metrics`).  Those of a process the scenario does not
    declare are ignored (there is no span to measure them over); a declared workload without
    records appears with 0 requests.
    """
    run_duration = scenario.duration if ran_for is None else min(ran_for, scenario.duration)
    interval = scenario.report.interval
    workloads = {
        w.name: workload_stats(
            w, operations(records.get(w.name, [])), t0, run_duration, interval, list(faults)
        )
        for w in scenario.workloads
    }
    processes = [*(s.name for s in scenario.services), *(w.name for w in scenario.workloads)]
    metrics = metric_stats(records, processes)
    series = metric_series(records, processes, t0)
    if scenario.report.timelines:
        metrics["timelines"] = timelines(series, scenario.report.timelines, interval, run_duration)
    nodes = node_stats(samples)
    for name in scenario.nodes:
        nodes.setdefault(name, {"counters": None, "totals": {}, "restarts": 0, "down_samples": 0})
    augmented = []
    for f in faults:
        text = fault_text(f)
        rec = {
            wname: r["recovery_s"]
            for wname, stats in workloads.items()
            for r in stats["recovery"]
            if r["fault"] == text and r["at"] == f.get("applied")
        }
        augmented.append({**f, "text": text, "recovery": rec})
    expectations = check_expectations(scenario, workloads, metrics, series, run_duration)
    invariants = check_invariants(
        scenario,
        check_stats(
            records, [*(s.name for s in scenario.services), *(w.name for w in scenario.workloads)]
        ),
    )
    report = {
        "scenario": scenario.name,
        "description": scenario.description,
        "meta": meta,
        "duration": run_duration,
        "interval": interval,
        "nodes": nodes,
        "links": link_stats(samples, [link.name for link in scenario.links]),
        # ndnSIM's L3RateTracer and CsTracer, per interval (docs/guides/report.md and
        # apps.scenario.tracers)
        "tracers": {
            "faces": face_table(samples),
            "cs": cs_table(samples),
            "app_delays": app_delay_table(
                {w.name: operations(records.get(w.name, [])) for w in scenario.workloads},
                [w.name for w in scenario.workloads],
                t0,
            ),
        },
        "workloads": workloads,
        "metrics": metrics,
        "faults": augmented,
        "route_events": list(route_events),
        "fault_counts": fault_counts(augmented),
        "expectations": expectations,
        "invariants": invariants,
        "passed": all(e["passed"] for e in [*expectations, *invariants]),
    }
    plain: dict[str, Any] = _plain(report)
    return plain


def write_report(report: dict[str, Any], out_dir: Path, plots: bool = True) -> list[Path]:
    """``report.json`` and, with ``plots``, ``throughput.png``, ``latency.png``, ``links.png``
    and ``metrics.png``.  The four plots are always written, so the set of files does not depend
    on the scenario; a plot with nothing to draw says "no data"."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    written = [path]
    if plots:
        from apps.scenario.plots import write_plots

        written += write_plots(report, out_dir)
    return written
