"""The plots of a scenario report: throughput, latency, link traffic and the metrics listed in
``report.timelines`` (e.g. calls per replica) over the run.

matplotlib is imported inside :func:`write_plots`, so importing the report stays cheap.  The
figures are drawn on Agg canvases directly, without pyplot: nothing global (pyplot's backend,
its list of open figures) changes in the process that writes the report.

Each plot is always written; one with nothing to draw (no workloads, no links, no samples)
shows "no data" so the set of files a run produces does not depend on the scenario.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLOTS = ("throughput.png", "latency.png", "links.png", "metrics.png")


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def _fault_lines(ax: Any, faults: Sequence[dict[str, Any]]) -> None:
    """A dashed vertical line at each applied fault, labeled with the fault."""
    for f in faults:
        applied = f.get("applied")
        if applied is None:
            continue
        color = "tab:red" if f.get("disruptive") else "tab:gray"
        ax.axvline(applied, color=color, linestyle="--", linewidth=1, alpha=0.8)
        ax.text(
            applied,
            0.98,
            f" {f.get('text') or f.get('action')}",
            transform=ax.get_xaxis_transform(),
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
            color=color,
        )


def _figure(title: str, ylabel: str, duration: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel(ylabel)
    if duration > 0:
        ax.set_xlim(0, duration)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _finish(fig: Any, ax: Any, drew: bool, faults: Sequence[dict[str, Any]], path: Path) -> Path:
    if drew:
        _fault_lines(ax, faults)
        ax.legend(loc="upper left", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center")
    fig.savefig(path, dpi=100)
    return path


def _steps(
    timeline: Sequence[dict[str, Any]], key: str, end: float
) -> tuple[list[float], list[float]]:
    """Bucket values as a step line: each value held from its bucket start to the next."""
    xs = [float(b["t"]) for b in timeline] + [end]
    ys = [_nan(b.get(key)) for b in timeline]
    return xs, [*ys, ys[-1]]


def plot_throughput(report: dict[str, Any], path: Path) -> Path:
    duration = float(report.get("duration") or 0)
    fig, ax = _figure("successes per second", "ok/s", duration)
    drew = False
    for name, w in (report.get("workloads") or {}).items():
        timeline = w.get("timeline") or []
        if timeline and "throughput" in w.get("reports", ["throughput"]):
            xs, ys = _steps(timeline, "throughput", w["active"]["end"])
            ax.step(xs, ys, where="post", label=name)
            drew = True
    return _finish(fig, ax, drew, report.get("faults") or [], path)


def plot_latency(report: dict[str, Any], path: Path) -> Path:
    duration = float(report.get("duration") or 0)
    fig, ax = _figure("latency of successes", "ms", duration)
    drew = False
    for name, w in (report.get("workloads") or {}).items():
        timeline = w.get("timeline") or []
        if "latency" not in w.get("reports", ["latency"]):
            continue
        if not any(b.get("p50_ms") is not None for b in timeline):
            continue
        end = w["active"]["end"]
        (line,) = ax.step(*_steps(timeline, "p50_ms", end), where="post", label=f"{name} p50")
        ax.step(
            *_steps(timeline, "p99_ms", end),
            where="post",
            linestyle=":",
            color=line.get_color(),
            label=f"{name} p99",
        )
        drew = True
    return _finish(fig, ax, drew, report.get("faults") or [], path)


# lines a legend can still tell apart: a large topology's links plot shows its busiest
MAX_LINK_LINES = 12


def plot_links(report: dict[str, Any], path: Path) -> Path:
    duration = float(report.get("duration") or 0)
    series: list[tuple[float, str, list[float], list[float]]] = []
    for name, link in (report.get("links") or {}).items():
        timeline = link.get("timeline") or []
        for key in (k for k, v in link.items() if ">" in k and isinstance(v, dict)):
            col = f"{key}_bytes_per_s"
            ys = [_nan(p.get(col)) for p in timeline]
            if not any(not math.isnan(y) for y in ys):
                continue
            xs = [float(p["t"]) for p in timeline]
            series.append((float(link[key].get("bytes") or 0), f"{key} ({name})", xs, ys))
    title = "link traffic"
    if len(series) > MAX_LINK_LINES:
        title += f" (the {MAX_LINK_LINES} busiest of {len(series)} link directions)"
        series = sorted(series, key=lambda s: -s[0])[:MAX_LINK_LINES]
    fig, ax = _figure(title, "bytes/s", duration)
    for _, label, xs, ys in series:
        ax.plot(xs, ys, marker=".", label=label)
    return _finish(fig, ax, bool(series), report.get("faults") or [], path)


def plot_metrics(report: dict[str, Any], path: Path) -> Path:
    """Each metric of ``report.timelines``, per process: its increase per second."""
    duration = float(report.get("duration") or 0)
    series = (report.get("metrics") or {}).get("timelines") or {}
    names = ", ".join(series) or "metrics"
    fig, ax = _figure(f"{names} per second, per process", "per second", duration)
    drew = False
    for metric, per_process in series.items():
        for process, rows in per_process.items():
            if not rows:
                continue
            label = process if len(series) == 1 else f"{process} {metric}"
            ax.step(*_steps(rows, "per_s", duration), where="post", label=label)
            drew = True
    return _finish(fig, ax, drew, report.get("faults") or [], path)


def write_plots(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """``throughput.png``, ``latency.png``, ``links.png`` and ``metrics.png`` in ``out_dir``."""
    return [
        plot_throughput(report, out_dir / "throughput.png"),
        plot_latency(report, out_dir / "latency.png"),
        plot_links(report, out_dir / "links.png"),
        plot_metrics(report, out_dir / "metrics.png"),
    ]
