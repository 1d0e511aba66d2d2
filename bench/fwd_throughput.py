"""Forwarder throughput on loopback, against a bare UDP relay measured in the same run.

Cases, each with the same lean consumer and producer (one process, uvloop when installed) and a
middle box in its own process:
  (a) consumer -> forwarder -> producer   (PIT, FIB, strategy and CS insert for each exchange)
  (b) consumer -> forwarder               (the same names again: answered by the content store)
  (c) consumer -> bare asyncio UDP relay -> producer   (no table work: the ceiling)
Each case runs --rounds times, alternating, and the median is reported.  The last line is
``forwarder/relay ratio: X``, the packet-rate ratio of case (a) to case (c).  The header names
the event loop each process ran, as seen in it (bench/loops.py).

Run: .venv/bin/python bench/fwd_throughput.py [--count 20000] [--window 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from apps.loadgen import Consumer, FetchResult, object_names, start_producer  # noqa: E402
from apps.procs import ProcessGroup, icn_argv  # noqa: E402
from apps.topology import free_udp_port  # noqa: E402
from bench import loops  # noqa: E402

HOST = "127.0.0.1"


async def fetch(entry: tuple[str, int], names: list[bytes], window: int) -> FetchResult:
    c = Consumer(entry, window=window, rto=1.0, max_retries=5)
    try:
        return await c.fetch(names, timeout=300)
    finally:
        c.close()


def line(label: str, results: list[FetchResult]) -> float:
    rates = [r.rate for r in results]
    med = statistics.median(rates)
    best = max(results, key=lambda r: r.rate)
    lost = sum(r.requested - r.received for r in results)
    print(
        f"{label:<38} {med:>9,.0f} exchanges/s (median of {len(rates)}: "
        + ", ".join(f"{x:,.0f}" for x in rates)
        + f")  RTT p50 {best.percentile(50):.2f} ms  p99 {best.percentile(99):.2f} ms"
        + (f"  [{lost} not received]" if lost else ""),
        flush=True,
    )
    return med


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-"))
    prod_port, fwd_port, relay_port = free_udp_port(), free_udp_port(), free_udp_port()
    transport, _producer = await start_producer(
        HOST, prod_port, prefix="/bench", payload_size=args.payload
    )
    group = ProcessGroup(workdir)
    try:
        fwd = group.start(
            "fwd",
            icn_argv(
                "fwd",
                "--udp",
                f"{HOST}:{fwd_port}",
                "--log-level",
                "info",
                "--cs-capacity",
                str(max(65_536, args.count * 2)),
                "--route",
                f"/bench=udp4://{HOST}:{prod_port}",
            ),
        )
        relay = group.start(
            "relay",
            [
                sys.executable,
                str(Path(__file__).with_name("udp_relay.py")),
                "--listen",
                f"{HOST}:{relay_port}",
                "--upstream",
                f"{HOST}:{prod_port}",
            ],
        )
        fwd.wait_for("forwarder ready", stream="stderr")
        relay.wait_for("relay ready", stream="stdout")
        ran = {  # each process's event loop, as seen in it (the forwarder's: what it loaded)
            "consumer and producer": loops.running(),
            "forwarder": loops.of_pid(fwd.pid),
            "relay": loops.from_ready(relay.output(), "relay ready"),
        }
        fwd_entry, relay_entry = (HOST, fwd_port), (HOST, relay_port)
        # warm up both paths (sockets, caches, branch predictors)
        await fetch(fwd_entry, object_names("/bench/warm/f", 2000), args.window)
        await fetch(relay_entry, object_names("/bench/warm/r", 2000), args.window)
        a: list[FetchResult] = []
        b: list[FetchResult] = []
        c: list[FetchResult] = []
        for rnd in range(args.rounds):
            names = object_names(f"/bench/r{rnd}", args.count)
            a.append(await fetch(fwd_entry, names, args.window))
            b.append(await fetch(fwd_entry, names, args.window))
            c.append(
                await fetch(relay_entry, object_names(f"/bench/x{rnd}", args.count), args.window)
            )
        counters = fwd.counters()
    finally:
        group.stop_all()
        transport.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"loopback UDP, {args.count} Interests per round, window {args.window}, "
        f"{args.payload} B content, DigestSha256 Data; event loops: {loops.summary(ran)}"
    )
    ra = line("(a) forwarder, producer behind it", a)
    line("(b) forwarder, content store hits", b)
    rc = line("(c) bare asyncio UDP relay", c)
    print(
        f"forwarder counters: cs.hit={counters.get('cs.hit', 0)} "
        f"fw.in_interest={counters.get('fw.in_interest', 0)} "
        f"pit entries now={counters.get('pit.size', 'n/a')}"
    )
    print(f"forwarder/relay ratio: {ra / rc:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000, help="Interests per case and round")
    ap.add_argument("--window", type=int, default=64, help="Interests in flight")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--payload", type=int, default=1024, help="content bytes per Data")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.run(main(args))
    except ImportError:
        asyncio.run(main(args))
