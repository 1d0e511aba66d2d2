"""What the live page shows, computed from what a run keeps: no I/O here.

A run's sampler (:mod:`apps.scenario.metrics`) leaves cumulative counters per node and per
link direction every ``report.interval``; the page wants rates, so :func:`link_rates` takes
the difference of two samples.  Workloads write one JSON line per request;
:class:`WorkloadSeries` buckets them per second (requests answered and failed, p50 and p99
latency).  :func:`frame` puts one moment together; the same frames drive the live page (one
pushed each second) and the replay of a finished run (``timeline.json``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apps.scenario.metrics import NODE_FIELDS  # the counters a frame carries, per node

if TYPE_CHECKING:
    from apps.scenario.schema import Scenario

TIMELINE_FILE = "timeline.json"
TIMELINE_VERSION = 1


def layout(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, list[float]]:
    """Node positions in [0, 1]: networkx's spring layout, seeded, so a run and its replay
    (and two runs of one file) draw the same picture."""
    import networkx as nx  # type: ignore[import-untyped]

    g = nx.Graph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    if len(nodes) == 1:
        return {nodes[0]: [0.5, 0.5]}
    pos = nx.spring_layout(g, seed=7, k=1.5 / math.sqrt(max(1, len(nodes))))
    xs = [float(p[0]) for p in pos.values()]
    ys = [float(p[1]) for p in pos.values()]
    x0, y0 = min(xs), min(ys)
    w, h = (max(xs) - x0) or 1.0, (max(ys) - y0) or 1.0
    return {str(n): [(float(p[0]) - x0) / w, (float(p[1]) - y0) / h] for n, p in pos.items()}


def topology(sc: Scenario, positions: Mapping[str, list[float]] | None = None) -> dict[str, Any]:
    """Nodes with positions (``positions``, from the scenario's graph file, else a layout),
    links with their two ends and shaping, workloads, faults planned, expectations."""
    nodes = list(sc.nodes)
    pos = dict(positions) if positions else layout(nodes, [link.between for link in sc.links])
    links = [
        {
            "name": link.name,
            "a": link.between[0],
            "b": link.between[1],
            "shaping": shaping_text(link.delay, link.jitter, link.loss, link.rate),
        }
        for link in sc.links
    ]
    return {
        "scenario": sc.name,
        "duration": sc.duration,
        "nodes": [{"name": n, "pos": pos[n]} for n in nodes],
        "links": links,
        "workloads": [{"name": w.name, "node": w.node} for w in sc.workloads],
        "faults": [{"at": f.at, "text": f.describe()} for f in sc.faults],
        "expectations": [
            expectation_text(e.model_dump(exclude_defaults=True)) for e in sc.report.expect
        ],
    }


def expectation_text(fields: Mapping[str, Any]) -> str:
    """An expectation as written: ``workload=fetch min_success_ratio=0.97``."""
    return " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)


def shaping_text(delay: float, jitter: float, loss: float, rate: float | None) -> str:
    """``10ms±2ms 1% 10Mbit/s``, or ``unshaped``."""
    parts = []
    if delay or jitter:
        parts.append(f"{delay * 1000:g}ms" + (f"±{jitter * 1000:g}ms" if jitter else ""))
    if loss:
        parts.append(f"{loss * 100:g}% loss")
    if rate:
        parts.append(f"{rate / 1e6:g}Mbit/s")
    return " ".join(parts) or "unshaped"


def link_rates(
    prev: Mapping[str, Any] | None, cur: Mapping[str, Any]
) -> dict[str, dict[str, dict[str, float]]]:
    """Per link and direction (``a>b``): bits and packets per second between two samples, and
    drops in the interval.  A counter that went down (a node restarted) counts from zero."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    dt = float(cur["t"]) - float(prev["t"]) if prev is not None else 0.0
    for link, dirs in cur.get("links", {}).items():
        out[link] = {}
        before = (prev or {}).get("links", {}).get(link, {})
        for direction, now in dirs.items():
            was = before.get(direction)
            if was is None or dt <= 0:
                out[link][direction] = {"bps": 0.0, "pps": 0.0, "dropped": 0.0}
                continue
            rate = {}
            for key, per in (("bytes", 8.0), ("packets", 1.0), ("dropped", 1.0)):
                delta = int(now.get(key, 0)) - int(was.get(key, 0))
                if delta < 0:
                    delta = int(now.get(key, 0))
                rate[key] = delta * per / dt if key != "dropped" else float(delta)
            out[link][direction] = {
                "bps": rate["bytes"],
                "pps": rate["packets"],
                "dropped": rate["dropped"],
            }
    return out


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


@dataclass
class WorkloadSeries:
    """One workload's requests bucketed per second of the run (``t`` of each record)."""

    ok: dict[int, int] = field(default_factory=dict)
    failed: dict[int, int] = field(default_factory=dict)
    latencies: dict[int, list[float]] = field(default_factory=dict)

    def add(self, rows: Iterable[Mapping[str, Any]], t0: float) -> None:
        for row in rows:
            if "ok" not in row or not isinstance(row.get("t"), int | float):
                continue  # a metric line
            second = int(float(row["t"]) - t0)
            if row["ok"]:
                self.ok[second] = self.ok.get(second, 0) + 1
                lat = row.get("latency")
                if isinstance(lat, int | float):
                    self.latencies.setdefault(second, []).append(float(lat))
            else:
                self.failed[second] = self.failed.get(second, 0) + 1

    def points(self, upto: float | None = None) -> list[dict[str, Any]]:
        """One point per second seen: requests answered and failed, latency p50 and p99 (ms).
        With ``upto``, only the seconds over by then: a second still going would draw as a
        drop in throughput."""
        seconds = sorted(set(self.ok) | set(self.failed))
        out = []
        for s in seconds:
            if upto is not None and s + 1 > upto + 1e-9:
                break
            lats = self.latencies.get(s, [])
            p50, p99 = _quantile(lats, 0.5), _quantile(lats, 0.99)
            out.append(
                {
                    "t": s,
                    "ok": self.ok.get(s, 0),
                    "failed": self.failed.get(s, 0),
                    "p50_ms": None if p50 is None else round(p50 * 1000, 3),
                    "p99_ms": None if p99 is None else round(p99 * 1000, 3),
                }
            )
        return out


def frame(
    samples: Sequence[Mapping[str, Any]],
    index: int,
    series: Mapping[str, WorkloadSeries],
    events: Sequence[Mapping[str, Any]],
    faults: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The moment of sample ``index``: its time, link rates since the sample before, node
    counters, workloads' points so far, events and faults up to then."""
    cur = samples[index]
    prev = samples[index - 1] if index > 0 else None
    t = float(cur["t"])
    nodes = {
        name: None if counters is None else {k: counters.get(k, 0) for k in NODE_FIELDS}
        for name, counters in cur.get("nodes", {}).items()
    }
    return {
        "t": t,
        "links": link_rates(prev, cur),
        "nodes": nodes,
        "workloads": {name: s.points(upto=t) for name, s in series.items()},
        "events": [e for e in events if e.get("t") is None or float(e["t"]) <= t + 1e-9],
        "faults": [f for f in faults if float(f.get("applied") or f.get("at") or 0) <= t],
    }
