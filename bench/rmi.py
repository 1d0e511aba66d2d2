"""Named-function calls (compute/rmi, RICE) against gRPC unary calls, measured in the same run.

Both sides call an echo function with a bytes argument and get the same bytes back, so each call
carries the payload both ways:
  rmi:  client (this process) -> one forwarder process (Unix socket) -> bench/rmi_server.py
        (a Trigger Interest, the server's Reflexive Interests for the caller's credential and,
        above 6000 B, its argument segments; results above 7000 B are fetched as segments)
  grpc: grpc.aio channel (this process) -> bench/grpc_server.py over TCP on 127.0.0.1
For each payload size and concurrency (calls in flight), each side runs after a warm-up for
--rounds rounds of --duration seconds, alternating.  Latency percentiles are over all rounds,
calls/s is the median round.  The ratios are rmi calls/s / grpc calls/s and rmi p50 / grpc p50.

Run: .venv/bin/python bench/rmi.py [--quick] [--duration 3] [--rounds 3] [--concurrency 1,64]
Needs grpcio: pip install -e .[bench]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from apps.procs import ProcessGroup, icn_argv
from compute.rmi import Client
from icn.dataplane.endpoint import Endpoint

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
PREFIX = "/bench"
GRPC_METHOD = "/bench.Bench/Echo"  # bench/grpc_server.py's SERVICE and METHOD

Call = Callable[[bytes], Awaitable[bytes]]


@dataclass
class Cell:
    """One side's measurements for one payload size and concurrency."""

    latencies: list[float] = field(default_factory=list)  # seconds, all rounds
    rates: list[float] = field(default_factory=list)  # calls/s, one per round
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    def ms(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        data = sorted(self.latencies)
        return 1000 * data[min(len(data) - 1, round(q / 100 * (len(data) - 1)))]


async def drive(
    call: Call, payload: bytes, concurrency: int, duration: float, timeout: float, cell: Cell
) -> int:
    """``concurrency`` workers call back to back for ``duration`` seconds (calls in flight at
    the end finish and count).  Adds a round to ``cell``; returns the calls made."""
    latencies: list[float] = []
    failed = 0
    clock = time.perf_counter
    start = clock()
    stop_at = start + duration

    async def worker() -> None:
        nonlocal failed
        while clock() < stop_at:
            t0 = clock()
            try:
                answer = await call(payload)
            except Exception as exc:  # counted and shown; a failing side must not hang
                cell.errors[type(exc).__name__] += 1
                failed += 1
                await asyncio.sleep(0.01)
                continue
            latencies.append(clock() - t0)
            if len(answer) != len(payload):
                cell.errors["wrong_echo"] += 1

    # every call is bounded by ``timeout``; this bounds the round as a whole
    async with asyncio.timeout(duration + timeout + 5):
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    cell.latencies += latencies
    cell.rates.append(len(latencies) / (clock() - start))
    return len(latencies) + failed


async def measure(
    sides: list[tuple[str, Call]], payload: bytes, conc: int, args: argparse.Namespace
) -> tuple[dict[str, Cell], int]:
    """Warm up each side, then ``args.rounds`` rounds of each, alternating.  Returns the cells
    by side and how many rmi calls were made (warm-up included)."""
    cells = {name: Cell() for name, _ in sides}
    made = 0
    for name, call in sides:  # connections, caches, the server's learnt run-time estimates
        n = await drive(call, payload, conc, args.warmup, args.timeout, Cell())
        made += n if name == "rmi" else 0
    for _ in range(args.rounds):
        for name, call in sides:
            n = await drive(call, payload, conc, args.duration, args.timeout, cells[name])
            made += n if name == "rmi" else 0
    return cells, made


def size_label(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def print_table(rows: list[tuple[int, int, Cell, Cell]]) -> None:
    head = (
        f"{'payload':>8} {'conc':>4} | {'rmi p50':>8} {'p99':>7} {'calls/s':>8} | "
        f"{'grpc p50':>8} {'p99':>7} {'calls/s':>8} | {'calls/s ratio':>13} {'p50 ratio':>9}"
    )
    print(head)
    print("-" * len(head))
    for size, conc, rmi, grpc_ in rows:
        print(
            f"{size_label(size):>8} {conc:>4} | {rmi.ms(50):>8.2f} {rmi.ms(99):>7.2f} "
            f"{rmi.rate:>8,.0f} | {grpc_.ms(50):>8.2f} {grpc_.ms(99):>7.2f} "
            f"{grpc_.rate:>8,.0f} | {rmi.rate / grpc_.rate if grpc_.rate else 0:>13.2f} "
            f"{rmi.ms(50) / grpc_.ms(50):>9.2f}"
        )
    print("(latency in ms; ratios are rmi / grpc: calls/s above 1 and p50 below 1 favour rmi)")
    for size, conc, rmi, grpc_ in rows:
        for side, cell in (("rmi", rmi), ("grpc", grpc_)):
            if cell.errors:
                print(f"  {side} {size_label(size)} x{conc} errors: {dict(cell.errors)}")


async def main(args: argparse.Namespace) -> None:
    import grpc

    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-rmi-"))
    sock = workdir / "fwd.sock"
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    group = ProcessGroup(workdir)
    client: Client | None = None
    channel: grpc.aio.Channel | None = None
    try:
        fwd = group.start(
            "fwd", icn_argv("fwd", "--unix", str(sock), "--log-level", "info"), env=env
        )
        gsrv = group.start("grpc", [sys.executable, str(ROOT / "bench" / "grpc_server.py")], env)
        fwd.wait_for("forwarder ready", stream="stderr")
        srv = group.start(
            "rmi_server",
            [
                sys.executable,
                "-m",
                "bench.rmi_server",
                "--connect",
                f"unix://{sock}",
                "--prefix",
                PREFIX,
            ],
            env,
        )
        srv.wait_for("ready", stream="stdout")
        gsrv.wait_for("ready", stream="stdout")
        port = int(gsrv.output().split("ready", 1)[1].split()[0])

        client = Client(await Endpoint.connect(f"unix://{sock}"), timeout=args.timeout)
        channel = grpc.aio.insecure_channel(f"{HOST}:{port}")
        stub = channel.unary_unary(GRPC_METHOD)
        rmi_client = client

        async def rmi_call(payload: bytes) -> bytes:
            return await rmi_client.call(f"{PREFIX}/echo", payload)  # type: ignore[no-any-return]

        async def grpc_call(payload: bytes) -> bytes:
            return await stub(payload, timeout=args.timeout)  # type: ignore[no-any-return]

        sides: list[tuple[str, Call]] = [("rmi", rmi_call), ("grpc", grpc_call)]
        rows: list[tuple[int, int, Cell, Cell]] = []
        per_call: list[str] = []  # Interests the forwarder saw per rmi call, by cell
        for size in args.sizes:
            payload = os.urandom(size)
            for conc in args.concurrency:
                before = fwd.counters().get("fw.in_interest", 0)
                cells, made = await measure(sides, payload, conc, args)
                interests = fwd.counters().get("fw.in_interest", 0) - before
                per_call.append(f"{size_label(size)} x{conc} {interests / max(made, 1):.1f}")
                rows.append((size, conc, cells["rmi"], cells["grpc"]))
                print(
                    f"  {size_label(size)} x{conc}: rmi {cells['rmi'].rate:,.0f} calls/s, "
                    f"grpc {cells['grpc'].rate:,.0f} calls/s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if client is not None:
            client.close()
        if channel is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(channel.close(), 5)
        group.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)

    loop_name = "uvloop" if "uvloop" in type(asyncio.get_running_loop()).__module__ else "asyncio"
    print(
        f"echo of a bytes argument (the result is the payload, both ways), {loop_name} client, "
        f"{args.rounds} x {args.duration:g} s per cell after {args.warmup:g} s warm-up"
    )
    print(
        "rmi: client -> forwarder (Unix socket) -> RMI server process; "
        f"grpc: grpc.aio {grpc.__version__} unary over TCP {HOST}"
    )
    print_table(rows)
    print("Interests through the forwarder per rmi call: " + ", ".join(per_call))
    ratios = [rmi.rate / g.rate for _, _, rmi, g in rows if g.rate and rmi.rate]
    if ratios:
        print(f"rmi/grpc calls/s ratio (geometric mean): {statistics.geometric_mean(ratios):.2f}")


def parse_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write integers separated by commas") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: write positive integers, e.g. 1,64")
    return values


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short run: 1 round of 1 s per cell")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per round and side")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per cell, sides alternating")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per cell, side")
    ap.add_argument("--concurrency", type=parse_ints, default=[1, 64], help="e.g. 1,64")
    ap.add_argument("--sizes", type=parse_ints, default=[100, 65536], help="argument bytes")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per call at most")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.rounds, args.warmup = 1.0, 1, 0.3
    try:
        import grpc
    except ImportError:
        sys.exit("bench/rmi.py needs grpcio for its peer: pip install -e .[bench]")
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        run(main(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        sys.exit("interrupted; child processes stopped, temporary files removed")
