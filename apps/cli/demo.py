"""``icn demo``: two forwarders on loopback, a producer behind them, a consumer in front.

The consumer fetches objects through both forwarders, then fetches them again: the second pass
is answered by the first forwarder's content store, which its counters show.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from apps.loadgen import Consumer, FetchResult, object_names
from apps.loop import run_loop
from apps.topology import start_line


async def _fetch(entry: tuple[str, int], names: list[bytes]) -> FetchResult:
    c = Consumer(entry, window=32)
    try:
        return await c.fetch(names, timeout=60)
    finally:
        c.close()


def run_demo(count: int = 1000, keep_logs: bool = False, console: Console | None = None) -> bool:
    """Run the demo; True when every object arrived on both passes."""

    console = console or Console()
    workdir = Path(tempfile.mkdtemp(prefix="icn-demo-"))
    ok = False
    try:
        console.print(
            f"[bold]Starting[/] producer and 2 forwarders on loopback (logs in {workdir})"
        )
        topo = start_line(workdir, 2, "/demo")
        try:
            names = object_names("/demo/object", count)
            first = run_loop(_fetch(topo.entry, names))
            second = run_loop(_fetch(topo.entry, names))
            counters = [f.counters() for f in topo.forwarders]
        finally:
            topo.stop()
        ok = bool(first.received == count and second.received == count)
        _report(console, count, first, second, counters)
    finally:
        if ok and not keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            console.print(f"logs kept in {workdir}")
    return ok


def _report(
    console: Console,
    count: int,
    first: FetchResult,
    second: FetchResult,
    counters: list[dict[str, Any]],
) -> None:
    table = Table(title=f"consumer -> fwd0 -> fwd1 -> producer, {count} objects of 1 KiB")
    table.add_column("pass", no_wrap=True)
    for col in ("received", "failed", "retx", "rate/s", "RTT p50 ms", "RTT p99 ms"):
        table.add_column(col, justify="right")
    for label, r in (("1: from producer", first), ("2: again (cached)", second)):
        table.add_row(
            label,
            str(r.received),
            str(r.failed),
            str(r.retransmissions),
            f"{r.rate:,.0f}",
            f"{r.percentile(50):.2f}",
            f"{r.percentile(99):.2f}",
        )
    console.print(table)
    ct = Table(title="forwarder counters")
    ct.add_column("counter")
    for i in range(len(counters)):
        ct.add_column(f"fwd{i}", justify="right")
    keys = ("fw.in_interest", "fw.out_interest", "fw.in_data", "fw.out_data", "cs.hit", "cs.miss")
    for key in keys:
        ct.add_row(key, *(str(c.get(key, 0)) for c in counters))
    console.print(ct)
    verdict = "[green]OK[/]" if first.received == second.received == count else "[red]FAILED[/]"
    console.print(
        f"{verdict}: pass 2 served {counters[0].get('cs.hit', 0)} objects from fwd0's content store"
    )
