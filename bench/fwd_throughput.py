"""Forwarder throughput on loopback, against a bare UDP relay measured in the same run.

Cases, each with the same lean consumer and producer (one process, uvloop when installed) and a
middle box in its own process:
  (a) consumer -> forwarder -> producer   (PIT, FIB, strategy and CS insert for each exchange)
  (b) consumer -> forwarder               (the same names again: answered by the content store)
  (c) consumer -> bare asyncio UDP relay -> producer   (no table work: the ceiling)
Each case runs --rounds times, alternating, and the median is reported.  The last line is
``forwarder/relay ratio: X``, the packet-rate ratio of case (a) to case (c).  The header names
the event loop each process ran, as seen in it (bench/loops.py).

With ``--scrape`` and/or ``--pcap`` one more forwarder per option runs beside the plain one, the
same but serving /metrics scraped once a second (``--scrape``) or capturing every packet to a
pcapng file (``--pcap``); each takes its turn in every round with fresh names, and its median is
printed with its ratio to the plain forwarder's (a), appended to the last line as
``scrape/plain: X`` / ``pcap/plain: Y``.

Run: .venv/bin/python bench/fwd_throughput.py [--count 20000] [--window 64] [--rounds 3]
     [--scrape] [--pcap]
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


async def scrape_every_second(url: str, counts: list[int]) -> None:
    """Fetch ``url`` (host:port/metrics) once a second, as Prometheus would; count the scrapes."""
    host, _, rest = url.removeprefix("http://").partition(":")
    port = int(rest.split("/", 1)[0])
    while True:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
        body = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        if body.startswith(b"HTTP/1.1 200"):
            counts[0] += 1
        await asyncio.sleep(1.0)


def observed_variants(args: argparse.Namespace, workdir: Path) -> list[tuple[str, list[str]]]:
    """(label, extra ``icn fwd`` options) of each observed forwarder the options ask for."""
    out: list[tuple[str, list[str]]] = []
    if args.scrape:
        out.append(("scrape", ["--metrics", f"{HOST}:0"]))
    if args.pcap:
        out.append(("pcap", ["--pcap", str(workdir / "bench.pcapng")]))
    return out


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-"))
    prod_port, fwd_port, relay_port = free_udp_port(), free_udp_port(), free_udp_port()
    variants = observed_variants(args, workdir)
    var_ports = [free_udp_port() for _ in variants]
    scrapes = [0]
    scraper: asyncio.Task[None] | None = None
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
        observed = []
        for (label, extra), port in zip(variants, var_ports, strict=True):
            argv = ["fwd", "--udp", f"{HOST}:{port}", "--log-level", "info"]
            argv += ["--cs-capacity", str(max(65_536, args.count * 2))]
            argv += ["--route", f"/bench=udp4://{HOST}:{prod_port}", *extra]
            observed.append(group.start(f"fwd-{label}", icn_argv(*argv)))
        fwd.wait_for("forwarder ready", stream="stderr")
        relay.wait_for("relay ready", stream="stdout")
        for (label, _), child in zip(variants, observed, strict=True):
            child.wait_for("forwarder ready", stream="stderr")
            if label == "scrape":
                child.wait_for("metrics on", stream="stderr")
                url = child.errors().split("metrics on ", 1)[1].split()[0]
                scraper = asyncio.ensure_future(scrape_every_second(url, scrapes))
        ran = {  # each process's event loop, as seen in it (the forwarder's: what it loaded)
            "consumer and producer": loops.running(),
            "forwarder": loops.of_pid(fwd.pid),
            "relay": loops.from_ready(relay.output(), "relay ready"),
        }
        fwd_entry, relay_entry = (HOST, fwd_port), (HOST, relay_port)
        # warm up both paths (sockets, caches, branch predictors)
        await fetch(fwd_entry, object_names("/bench/warm/f", 2000), args.window)
        await fetch(relay_entry, object_names("/bench/warm/r", 2000), args.window)
        for i, port in enumerate(var_ports):
            await fetch((HOST, port), object_names(f"/bench/warm/v{i}", 2000), args.window)
        d: list[list[FetchResult]] = [[] for _ in variants]
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
            for i, port in enumerate(var_ports):
                names_v = object_names(f"/bench/v{i}r{rnd}", args.count)
                d[i].append(await fetch((HOST, port), names_v, args.window))
        counters = fwd.counters()
        observed_counters = [child.counters() for child in observed]
    finally:
        if scraper is not None:
            scraper.cancel()
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
    tail = ""
    for (label, _), results, oc in zip(variants, d, observed_counters, strict=True):
        rd = line(f"(d) forwarder with --{label}", results)
        if label == "scrape":
            print(f"    {scrapes[0]} scrapes of /metrics, once a second, during the rounds")
        else:
            print(
                f"    {oc.get('capture.packets', 0):,} packets captured, "
                f"{oc.get('capture.not_written', 0)} not written, "
                f"{oc.get('capture.rotations', 0)} rotations"
            )
        print(f"{label}/plain: {rd / ra:.3f}")
        tail += f", {label}/plain: {rd / ra:.2f}"
    print(f"forwarder/relay ratio: {ra / rc:.2f}{tail}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000, help="Interests per case and round")
    ap.add_argument("--window", type=int, default=64, help="Interests in flight")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--payload", type=int, default=1024, help="content bytes per Data")
    ap.add_argument(
        "--scrape",
        action="store_true",
        help="also a forwarder serving /metrics, scraped each second",
    )
    ap.add_argument(
        "--pcap", action="store_true", help="also a forwarder capturing every packet (pcapng)"
    )
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.run(main(args))
    except ImportError:
        asyncio.run(main(args))
