"""The end-of-run summary in the terminal: rich tables of a report built by
:func:`apps.scenario.report.build_report` (workloads, faults, links, nodes, metrics, faults
injected per kind, expectations, invariants)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from apps.scenario.report import fault_text, pct, secs

# A topology of a hundred nodes has a hundred node rows and two hundred link directions: the
# tables show the rows that say something (drops, restarts, down samples) and then the busiest,
# up to this many, and say how many more report.json holds
MAX_ROWS = 20


def _kept(rows: list[tuple[bool, float, Any]]) -> tuple[list[Any], int]:
    """The rows to show, in their original order: every notable one (first of each triple),
    then the largest by the second, up to :data:`MAX_ROWS` in all; and how many were left out."""
    if len(rows) <= MAX_ROWS:
        return [row for _, _, row in rows], 0
    ranked = sorted(range(len(rows)), key=lambda i: (not rows[i][0], -rows[i][1]))
    keep = set(ranked[:MAX_ROWS])
    return [row for i, (_, _, row) in enumerate(rows) if i in keep], len(rows) - len(keep)


def _more(console: Console, left_out: int, what: str, busiest: str) -> None:
    if left_out:
        console.print(f"  ... {left_out} more {what} ({busiest}; every one in report.json)")


def _fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def render_summary(report: dict[str, Any], console: Console) -> None:
    """Tables for workloads, faults, links, nodes, metrics, faults injected, expectations and
    invariants, then a verdict line."""
    title = f"scenario {report.get('scenario')}"
    if report.get("description"):
        title += f": {report['description']}"
    console.print(f"[bold]{title}[/bold]")

    wl = Table(
        "workload",
        "requests",
        "ok",
        "failed",
        "success",
        "throughput/s",
        "p50 ms",
        "p99 ms",
        title="workloads",
        box=box.SIMPLE,
    )
    for name, w in (report.get("workloads") or {}).items():
        ratio = w.get("success_ratio")
        shows = set(w.get("reports", ["latency", "throughput", "success"]))
        lat = w.get("latency_ms") if "latency" in shows else None
        lat = lat or {}
        counts = "success" in shows
        wl.add_row(
            name,
            str(w["requests"]) if counts else "-",
            str(w["ok"]) if counts else "-",
            str(w["failed"]) if counts else "-",
            "-" if ratio is None or not counts else pct(ratio),
            _fmt(w.get("throughput") if "throughput" in shows else None, ".2f"),
            _fmt(lat.get("p50")),
            _fmt(lat.get("p99")),
        )
    console.print(wl)

    if report.get("faults"):
        ft = Table(
            "planned s", "applied s", "action", "target", "recovery", title="faults", box=box.SIMPLE
        )
        for f in report["faults"]:
            rec = ", ".join(
                f"{w}: {'never' if s is None else secs(s)}"
                for w, s in (f.get("recovery") or {}).items()
            )
            if f.get("error"):
                rec = f"[red]error: {f['error']}[/red]" + (f"; {rec}" if rec else "")
            ft.add_row(
                _fmt(f.get("at"), ".2f"),
                _fmt(f.get("applied"), ".2f"),
                str(f.get("action")),
                fault_text(f).split(" ", 1)[1],
                rec or "-",
            )
        console.print(ft)

    if report.get("links"):
        lt = Table(
            "link", "direction", "bytes", "packets", "dropped", title="links", box=box.SIMPLE
        )
        directions: list[tuple[bool, float, tuple[str, ...]]] = []
        for name, link in report["links"].items():
            for key, val in link.items():
                if ">" in key and isinstance(val, dict):
                    dropped = val.get("dropped", 0)
                    cells = (
                        name,
                        key,
                        f"{val['bytes']:,}",
                        f"{val['packets']:,}",
                        f"{dropped:,}",
                    )
                    directions.append((dropped > 0, float(val["bytes"]), cells))
        shown, left_out = _kept(directions)
        for cells in shown:
            lt.add_row(*cells)
        console.print(lt)
        _more(console, left_out, "link directions", "fewer bytes, none dropped")

    if report.get("nodes"):
        _nodes_table(report["nodes"], console)

    _metrics_table(report.get("metrics") or {}, console)

    _fault_counts_table(report.get("fault_counts") or [], console)

    expectations = report.get("expectations") or []
    if expectations:
        et = Table("", "subject", "criterion", "result", title="expectations", box=box.SIMPLE)
        for e in expectations:
            mark = "[green]PASS[/green]" if e["passed"] else "[red]FAIL[/red]"
            et.add_row(mark, _subject(e), e["criterion"], e["text"])
        console.print(et)
    invariants = report.get("invariants") or []
    _invariants_table(invariants, console)
    _verdict(expectations, invariants, console)


def _verdict(
    expectations: list[dict[str, Any]], invariants: list[dict[str, Any]], console: Console
) -> None:
    failed = [e for e in expectations if not e["passed"]]
    violated = [i for i in invariants if not i["passed"]]
    if not expectations and not invariants:
        console.print("no expectations")
        return
    if failed or violated:
        parts = []
        if failed:
            what = "; ".join(f"{_subject(e)}: {e['text']}" for e in failed)
            parts.append(f"{len(failed)} of {len(expectations)} expectations failed ({what})")
        if violated:
            what = "; ".join(f"{i['check']} of {i['process']}: {i['text']}" for i in violated)
            parts.append(f"{len(violated)} of {len(invariants)} invariants not held ({what})")
        console.print(f"[bold red]FAILED: {'; '.join(parts)}[/bold red]")
        return
    held = [f"{len(expectations)} expectations held"] if expectations else []
    if invariants:
        checks = sum(int(i.get("checks") or 0) for i in invariants)
        held.append(f"{len(invariants)} invariants held ({checks:,} checks)")
    console.print(f"[bold green]PASSED: {', '.join(held)}[/bold green]")


def _fault_counts_table(counts: list[Mapping[str, Any]], console: Console) -> None:
    """Faults injected, per kind: planned, applied, failed (a long chaos run's faults table
    is long; this is its total)."""
    if not counts:
        return
    ft = Table("fault", "planned", "applied", "failed", title="faults injected", box=box.SIMPLE)
    for c in counts:
        failed = int(c.get("failed") or 0)
        ft.add_row(
            str(c["fault"]),
            str(c["planned"]),
            str(c["applied"]),
            f"[red]{failed}[/red]" if failed else "0",
        )
    console.print(ft)


def _invariants_table(invariants: list[Mapping[str, Any]], console: Console) -> None:
    if not invariants:
        return
    it = Table(
        "",
        "invariant",
        "process",
        "checks",
        "held",
        "violated",
        "outcomes",
        title="invariants",
        box=box.SIMPLE,
    )
    for i in invariants:
        mark = "[green]HELD[/green]" if i["passed"] else "[red]NOT HELD[/red]"
        outcomes = ", ".join(f"{o} {n:,}" for o, n in (i.get("outcomes") or {}).items())
        if not i["passed"]:
            outcomes = i["text"] + (f"; first: {i['examples'][0]}" if i.get("examples") else "")
        it.add_row(
            mark,
            str(i["check"]),
            str(i["process"]),
            f"{i['checks']:,}",
            f"{i['held']:,}",
            f"[red]{i['violated']:,}[/red]" if i["violated"] else "0",
            outcomes or "-",
        )
    console.print(it)


# forwarder counters beyond NFD's status, shown under their own names when a run has them
CACHE_COUNTERS = ("fw.cs_hit", "fw.cs_hit_bytes")


def _nodes_table(nodes: Mapping[str, Any], console: Console) -> None:
    extra = [k for k in CACHE_COUNTERS if any(k in (n.get("totals") or {}) for n in nodes.values())]
    nt = Table(
        "node",
        "in interests",
        "out interests",
        "out data",
        "satisfied",
        "unsatisfied",
        *extra,
        "restarts",
        title="nodes (over the run)",
        box=box.SIMPLE,
    )
    rows: list[tuple[bool, float, tuple[str, ...]]] = []
    for name, node in nodes.items():
        tot = node.get("totals") or {}

        def cell(key: str, tot: Mapping[str, Any] = tot) -> str:
            return "-" if key not in tot else f"{tot[key]:,}"

        n_down = node.get("down_samples") or 0
        down = f" (down {n_down} sample{'s' if n_down > 1 else ''})" if n_down else ""
        cells = (
            name,
            cell("n_in_interests"),
            cell("n_out_interests"),
            cell("n_out_data"),
            cell("n_satisfied_interests"),
            cell("n_unsatisfied_interests"),
            *(cell(k) for k in extra),
            f"{node.get('restarts', 0)}{down}",
        )
        notable = bool(node.get("restarts") or n_down)
        rows.append((notable, float(tot.get("n_in_interests") or 0), cells))
    shown, left_out = _kept(rows)
    for cells in shown:
        nt.add_row(*cells)
    console.print(nt)
    _more(console, left_out, "nodes", "fewer Interests in, no restart")


def _value(x: float) -> str:
    """Whole numbers in full with separators (byte counts), others to 6 digits."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e18 else f"{x:,.6g}"


def _subject(e: Mapping[str, Any]) -> str:
    return str(e.get("subject") or e.get("workload"))


def _metrics_table(metrics: Mapping[str, Any], console: Console) -> None:
    """Each process's last value of each metric, then the totals (when several reported)."""
    processes: Mapping[str, Mapping[str, float]] = metrics.get("processes") or {}
    if not processes:
        return
    mt = Table("process", "metric", "value", title="metrics (last values)", box=box.SIMPLE)
    for name, values in processes.items():
        for metric, value in values.items():
            mt.add_row(name, metric, _value(value))
    if len(processes) > 1:
        for metric, value in (metrics.get("totals") or {}).items():
            mt.add_row("[bold]total[/bold]", metric, f"[bold]{_value(value)}[/bold]")
    console.print(mt)
