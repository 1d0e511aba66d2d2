"""Named-function calls (compute/rmi, RICE) against gRPC unary calls, measured in the same run,
both read against a ceiling: bare msgpack request/response over asyncio TCP.

Every side calls an echo function with a bytes argument and gets the same bytes back, so each
call carries the payload both ways:
  rmi:     client (this process) -> one forwarder process (Unix socket) -> bench/rmi_server.py.
           The client keeps a session per server: its first call runs the full exchange (a
           Trigger Interest and the server's Reflexive Interest for the caller's credential,
           which holds arguments up to the path's packet limit, as the client asks its
           forwarder first when they exceed 6000 B) and agrees the session; later calls are one
           HMAC-signed Interest and its Data, arguments and results inline up to the path's
           packet limit (4 MiB here: every hop to the server is local, as the client asks its
           forwarder once per session).  The table's cells measure these later calls.  As
           client and server share this host, payloads over 4 KiB go in the session's memory
           file (compute/rmi/local.py), the packets saying where; --payloads packets keeps
           them in the packets, as between hosts.
  grpc:    grpc.aio channel (this process) -> bench/grpc_server.py over TCP on 127.0.0.1
  ceiling: one TCP connection (this process) -> bench/rmi_ceiling_server.py on 127.0.0.1,
           length-prefixed msgpack frames [call id, bytes] multiplexed by call id, answered
           in order with no naming, signature or task per call: what any Python asyncio RPC
           pays at least, so rmi/ceiling and grpc/ceiling say how close each side comes to it
All three clients share this process's event loop, and every server runs the same kind: uvloop
when installed (grpc.aio serves under uvloop, so bench/grpc_server.py runs on it; should it fail
to start there, that server runs on asyncio's loop and the header says why).  The header's first
line names the loop each process ran, as seen in it (bench/loops.py).
For each payload size and concurrency (calls in flight), each side runs after a warm-up for
--rounds rounds of --duration seconds, the sides alternating.  Latency percentiles are over all
rounds, calls/s is the median round.  The ratios are rmi calls/s / grpc calls/s and rmi p50 /
grpc p50 (first table), and rmi and grpc calls/s over the ceiling's (second table).

A cell where a side failed (a call raised or echoed wrongly, or none was answered) shows FAILED
and the side in place of its ratios, is left out of the geometric means, and each ratio line
says how many cells failed and which; the benchmark then exits with status 1.

Then the first call of a session, the full exchange: --first-calls fresh rmi clients on the
same endpoint each make one call, one at a time, per payload size (p50 and p99 over them; with
fewer than 100 calls the p99 is the slowest).

Between hosts, --netns (root; bench/rmi_netns.py): the client side (this process: the
measuring loop, the rmi client, the grpc channel, the ceiling client) runs with a forwarder of
its own in one network namespace, the three servers and the rmi server's forwarder in another,
joined by one veth pair (MTU 1500): rmi goes client -> its forwarder -> a UDP face across the
veth -> the server's forwarder -> the rmi server; grpc and the ceiling go over TCP across the
veth.  Payloads are in the packets (no memory file between hosts); both forwarders' UDP faces
carry packets up to 128 KiB (udp_max_packet, a fabric set alike), so a 64 KiB call is one
Interest and one Data, where NDN's 8800 B would make it segments; a line says what crossed the
veth per rmi call: NDN packets, the UDP datagrams that carried them (more datagrams than packets
are NDNLPv2 fragments) and the IP fragments the kernel cut them into.

Run: .venv/bin/python bench/rmi.py [--quick] [--duration 3] [--rounds 3] [--concurrency 1,64]
     [--payloads shared|packets] [--grpc-loop auto|asyncio] [--netns]
Needs grpcio: pip install -e .[bench]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
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
from typing import Protocol

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from apps.procs import ProcessGroup, icn_argv  # noqa: E402
from bench import loops, rmi_netns  # noqa: E402
from bench.arguments import parse_ints  # noqa: E402
from bench.rmi_ceiling_server import CeilingClient  # noqa: E402
from compute.rmi import Client  # noqa: E402
from icn.dataplane.endpoint import Endpoint  # noqa: E402

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

    @property
    def failed(self) -> bool:
        """A call failed or echoed wrongly, or none was answered: the cell's figures are not
        comparable, so it is counted as failed, not left out quietly."""
        return bool(self.errors) or not self.latencies

    def ms(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        data = sorted(self.latencies)
        return 1000 * data[min(len(data) - 1, round(q / 100 * (len(data) - 1)))]


Row = tuple[int, int, Cell, Cell, Cell]  # payload size, concurrency, rmi, grpc, ceiling


class Counting(Protocol):
    """A forwarder whose counters can be read (apps.procs.Child, bench.rmi_netns's)."""

    def counters(self) -> dict[str, int]: ...


class LinkCounting(Protocol):
    """--netns: what crossed the veth between the forwarders (bench.rmi_netns.Link)."""

    async def read(self) -> Counter[str]: ...

    def per_call(self, moved: Counter[str], calls: int) -> str: ...

    def notes(self, moved: Counter[str]) -> list[str]: ...


@dataclass
class Peers:
    """Where the measuring part (:func:`bench`) finds the servers, and what the header says of
    the way to them: made by :func:`main` on one host, or with --netns by :func:`inside_netns`
    from what bench/rmi_netns.py started in the two namespaces."""

    connect: str  # the rmi client's forwarder
    host: str  # the grpc and ceiling servers' address
    grpc_port: int
    ceiling_port: int
    fwd: Counting  # the rmi client's forwarder
    ran: dict[str, str]  # each other process's event loop (bench/loops.py)
    grpc_why: str  # why the grpc server is not on uvloop, where it is not
    rmi_path: str  # the header's words for the way rmi calls go ...
    tcp_path: str  # ... and grpc's and the ceiling's
    intro: list[str] = field(default_factory=list)  # header lines before those
    packets_why: str = "--payloads packets"  # why payloads are in the packets, where they are
    link: LinkCounting | None = None  # --netns: the veth between the forwarders


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


async def first_calls(
    ep: Endpoint, payload: bytes, count: int, timeout: float, shared: bool
) -> tuple[Cell, int]:
    """``count`` fresh clients on ``ep`` (each a new caller with its own key) make one call
    each, one at a time: the full exchange that agrees a session.  Returns the latencies and
    how many sessions were agreed."""
    cell = Cell()
    agreed = 0
    clock = time.perf_counter
    for _ in range(count):
        # not closed: close() would close the shared endpoint; a Client holds nothing else
        fresh = Client(ep, timeout=timeout, shared=shared)
        t0 = clock()
        try:
            answer = await fresh.call(f"{PREFIX}/echo", payload)
        except Exception as exc:  # counted and shown, as in drive()
            cell.errors[type(exc).__name__] += 1
            continue
        cell.latencies.append(clock() - t0)
        agreed += fresh.counters["sessions"]
        if len(answer) != len(payload):
            cell.errors["wrong_echo"] += 1
    return cell, agreed


def size_label(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def failed_sides(**cells: Cell) -> str:
    """``FAILED: rmi`` (or ``rmi+grpc``) when a side failed in a cell, else ``""``."""
    names = [name for name, cell in cells.items() if cell.failed]
    return f"FAILED: {'+'.join(names)}" if names else ""


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'payload':>8} {'conc':>4} | {'rmi p50':>8} {'p99':>7} {'calls/s':>8} | "
        f"{'grpc p50':>8} {'p99':>7} {'calls/s':>8} | {'calls/s ratio':>13} {'p50 ratio':>9}"
    )
    print(head)
    print("-" * len(head))
    for size, conc, rmi, grpc_, _ in rows:
        failed = failed_sides(rmi=rmi, grpc=grpc_)
        ratios = (
            f"{failed:>23}"
            if failed
            else f"{rmi.rate / grpc_.rate:>13.2f} {rmi.ms(50) / grpc_.ms(50):>9.2f}"
        )
        print(
            f"{size_label(size):>8} {conc:>4} | {rmi.ms(50):>8.2f} {rmi.ms(99):>7.2f} "
            f"{rmi.rate:>8,.0f} | {grpc_.ms(50):>8.2f} {grpc_.ms(99):>7.2f} "
            f"{grpc_.rate:>8,.0f} | {ratios}"
        )
    print("(latency in ms; ratios are rmi / grpc: calls/s above 1 and p50 below 1 favour rmi)")
    for size, conc, rmi, grpc_, ceil in rows:
        for side, cell in (("rmi", rmi), ("grpc", grpc_), ("ceiling", ceil)):
            if cell.errors:
                print(f"  {side} {size_label(size)} x{conc} errors: {dict(cell.errors)}")


def print_ceiling(rows: list[Row]) -> None:
    head = (
        f"{'payload':>8} {'conc':>4} | {'ceil p50':>8} {'p99':>7} {'calls/s':>8} | "
        f"{'rmi/ceiling':>11} {'grpc/ceiling':>12}"
    )
    print(head)
    print("-" * len(head))
    for size, conc, rmi, grpc_, ceil in rows:
        by_rmi = failed_sides(rmi=rmi, ceiling=ceil) or f"{rmi.rate / ceil.rate:.2f}"
        by_grpc = failed_sides(grpc=grpc_, ceiling=ceil) or f"{grpc_.rate / ceil.rate:.2f}"
        print(
            f"{size_label(size):>8} {conc:>4} | {ceil.ms(50):>8.2f} {ceil.ms(99):>7.2f} "
            f"{ceil.rate:>8,.0f} | {by_rmi:>11} {by_grpc:>12}"
        )
    print("(latency in ms; ratios are calls/s over the ceiling's)")


def ratio_line(what: str, cells: list[tuple[str, Cell, Cell]], a: str, b: str) -> str:
    """``{what} calls/s ratio (geometric mean): X`` over the cells (name, side ``a``'s, side
    ``b``'s) where neither side failed, then how many cells failed and which: a failed cell
    counts, as a failure, never dropped unsaid.  X is ``n/a`` when every cell failed."""
    ok: list[float] = []
    failed: list[str] = []
    for name, x, y in cells:
        why = failed_sides(**{a: x, b: y})
        if why:
            failed.append(f"{name} {why.removeprefix('FAILED: ')}")
        else:
            ok.append(x.rate / y.rate)
    mean = f"{statistics.geometric_mean(ok):.2f}" if ok else "n/a"
    line = f"{what} calls/s ratio (geometric mean): {mean}"
    if failed:
        line += f", {len(failed)} of {len(cells)} cells failed (not in the mean): "
        line += ", ".join(failed)
    return line


def cancel_on_sigterm() -> None:
    """SIGTERM cancels the running task, as ^C would: every ``finally`` below runs."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def main(args: argparse.Namespace) -> int:
    """One host: the forwarder and the servers start here, then :func:`bench` measures.
    Returns how many cells failed on some side."""
    cancel_on_sigterm()
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-rmi-"))
    sock = workdir / "fwd.sock"
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    group = ProcessGroup(workdir)
    try:
        fwd = group.start(
            "fwd", icn_argv("fwd", "--unix", str(sock), "--log-level", "info"), env=env
        )
        gsrv = group.start("grpc", tcp_server_argv("grpc", HOST, args.grpc_loop), env)
        csrv = group.start("ceiling", tcp_server_argv("ceiling", HOST, args.grpc_loop), env)
        fwd.wait_for("forwarder ready", stream="stderr")
        srv = group.start("rmi_server", rmi_server_argv(f"unix://{sock}"), env)
        for child in (srv, gsrv, csrv):
            child.wait_for("ready", stream="stdout")
        ready = servers_ready(gsrv.output(), csrv.output())
        port, ceiling_port, grpc_ran, ceiling_ran, grpc_why = ready
        peers = Peers(
            connect=f"unix://{sock}",
            host=HOST,
            grpc_port=port,
            ceiling_port=ceiling_port,
            fwd=fwd,
            ran={  # each process's event loop, as seen in it (the forwarder's: what it loaded)
                "forwarder": loops.of_pid(fwd.pid),
                "rmi server": loops.from_ready(srv.output(), "ready"),
                "grpc server": grpc_ran,
                "ceiling server": ceiling_ran,
            },
            grpc_why=grpc_why,
            rmi_path="client -> forwarder (Unix socket) -> RMI server process",
            tcp_path=HOST,
        )
        return await bench(args, peers)
    finally:
        group.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


def tcp_server_argv(which: str, host: str, grpc_loop: str) -> list[str]:
    """The command of the grpc or the ceiling server, listening on ``host``."""
    if which == "grpc":
        return [
            sys.executable,
            str(ROOT / "bench" / "grpc_server.py"),
            "--loop",
            grpc_loop,
            "--host",
            host,
        ]
    return [sys.executable, str(ROOT / "bench" / "rmi_ceiling_server.py"), "--host", host]


def servers_ready(grpc_out: str, ceiling_out: str) -> tuple[int, int, str, str, str]:
    """From the grpc and ceiling servers' output once ready: their ports, their event loops
    and why grpc's is not uvloop (bench/grpc_server.py says it in parentheses)."""
    port = int(grpc_out.split("ready", 1)[1].split()[0])
    ceiling_port = int(ceiling_out.split("ready", 1)[1].split()[0])
    grpc_why = grpc_out.split("ready", 1)[1].split("\n", 1)[0].partition("(")[2].rpartition(")")[0]
    grpc_ran, ceiling_ran = (loops.from_ready(out, "ready") for out in (grpc_out, ceiling_out))
    return port, ceiling_port, grpc_ran, ceiling_ran, grpc_why


def rmi_server_argv(connect: str) -> list[str]:
    return [sys.executable, "-m", "bench.rmi_server", "--connect", connect, "--prefix", PREFIX]


async def inside_netns(args: argparse.Namespace) -> int:
    """--netns's measuring child, in the client namespace: :func:`bench` against the servers
    bench/rmi_netns.py started in the server namespace."""
    spec = rmi_netns.Spec.read(Path(args.inside_netns))
    port, ceiling_port, grpc_ran, ceiling_ran, grpc_why = servers_ready(
        spec.grpc_ready, spec.ceiling_ready
    )
    peers = Peers(
        connect=f"unix://{spec.client_sock}",
        host=spec.server_addr,
        grpc_port=port,
        ceiling_port=ceiling_port,
        fwd=rmi_netns.LoggedForwarder(*spec.client_fwd),
        ran={
            "client forwarder": loops.of_pid(spec.client_fwd[0]),
            "server forwarder": loops.of_pid(spec.server_fwd[0]),
            "rmi server": loops.from_ready(spec.rmi_ready, "ready"),
            "grpc server": grpc_ran,
            "ceiling server": ceiling_ran,
        },
        grpc_why=grpc_why,
        rmi_path=(
            "client -> its forwarder (Unix socket) -> UDP face across the veth -> the "
            "server's forwarder -> RMI server process (Unix socket)"
        ),
        tcp_path=f"across the veth to {spec.server_addr}",
        intro=[spec.intro()],
        packets_why="--netns: client and server on different hosts, no memory file",
        link=rmi_netns.Link(spec),
    )
    return await bench(args, peers)


async def bench(args: argparse.Namespace, peers: Peers) -> int:
    """The measurement, on one host or in --netns's client namespace: the rmi client, the
    grpc channel and the ceiling client in this process, the servers as ``peers`` says.
    Prints the header, the tables and the ratio lines; returns how many cells failed."""
    import grpc  # type: ignore[import-untyped]

    cancel_on_sigterm()
    shared = args.payloads == "shared"
    client: Client | None = None
    channel: grpc.aio.Channel | None = None
    ceiling: CeilingClient | None = None
    fwd = peers.fwd
    try:
        client = Client(await Endpoint.connect(peers.connect), timeout=args.timeout, shared=shared)
        # no HTTP proxy for the server's address, whatever the environment says
        options = [("grpc.enable_http_proxy", 0)]
        channel = grpc.aio.insecure_channel(f"{peers.host}:{peers.grpc_port}", options=options)
        stub = channel.unary_unary(GRPC_METHOD)
        ceiling = await CeilingClient.connect(peers.host, peers.ceiling_port)
        rmi_client, ceiling_client = client, ceiling

        async def rmi_call(payload: bytes) -> bytes:
            return await rmi_client.call(f"{PREFIX}/echo", payload)  # type: ignore[no-any-return]

        async def grpc_call(payload: bytes) -> bytes:
            return await stub(payload, timeout=args.timeout)  # type: ignore[no-any-return]

        async def ceiling_call(payload: bytes) -> bytes:
            return await ceiling_client.call(payload, args.timeout)

        sides: list[tuple[str, Call]] = [
            ("rmi", rmi_call),
            ("grpc", grpc_call),
            ("ceiling", ceiling_call),
        ]
        rows: list[Row] = []
        per_call: list[str] = []  # Interests the forwarder saw per rmi call, by cell
        local: list[str] = []  # answers through the memory file per rmi call, by cell
        on_link: list[str] = []  # --netns: what crossed the veth per rmi call, by cell
        link_moved: Counter[str] = Counter()
        for size in args.sizes:
            payload = os.urandom(size)
            for conc in args.concurrency:
                label = f"{size_label(size)} x{conc}"
                # read outside the forwarder's count: reading the link asks it for its faces
                link_before = await peers.link.read() if peers.link else Counter[str]()
                before = fwd.counters().get("fw.in_interest", 0)
                answers = client.counters["local_answers"]
                cells, made = await measure(sides, payload, conc, args)
                interests = fwd.counters().get("fw.in_interest", 0) - before
                per_call.append(f"{label} {interests / max(made, 1):.1f}")
                answers = client.counters["local_answers"] - answers
                local.append(f"{label} {answers / max(made, 1):.2f}")
                if peers.link is not None:
                    moved = await peers.link.read()
                    moved.subtract(link_before)
                    on_link.append(f"{label} {peers.link.per_call(moved, made)}")
                    link_moved.update(moved)
                rows.append((size, conc, cells["rmi"], cells["grpc"], cells["ceiling"]))
                print(
                    f"  {label}: rmi {cells['rmi'].rate:,.0f} calls/s, "
                    f"grpc {cells['grpc'].rate:,.0f} calls/s, "
                    f"ceiling {cells['ceiling'].rate:,.0f} calls/s",
                    file=sys.stderr,
                    flush=True,
                )
        # after the steady state, so the server and forwarder are as warm as for those cells
        firsts: list[tuple[int, Cell, int, float]] = []  # size, latencies, agreed, Interests
        for size in args.sizes:
            payload = os.urandom(size)
            before = fwd.counters().get("fw.in_interest", 0)
            cell, agreed = await first_calls(
                client.ep, payload, args.first_calls, args.timeout, shared
            )
            interests = fwd.counters().get("fw.in_interest", 0) - before
            firsts.append((size, cell, agreed, interests / max(args.first_calls, 1)))
        ran = {"client": loops.running(), **peers.ran}
    finally:
        if client is not None:
            client.close()
        if channel is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(channel.close(), 5)
        if ceiling is not None:
            await ceiling.close()

    print(
        f"echo of a bytes argument (the result is the payload, both ways), "
        f"{args.rounds} x {args.duration:g} s per cell after {args.warmup:g} s warm-up; "
        f"event loops: {loops.summary(ran)}"
    )
    if peers.grpc_why:
        print(f"grpc server not on uvloop: {peers.grpc_why}")
    for line in peers.intro:
        print(line)
    print(
        f"rmi: {peers.rmi_path}, in a session; "
        f"grpc: grpc.aio {grpc.__version__} unary over TCP {peers.tcp_path}"
    )
    print(
        "payloads over 4 KiB: "
        + (
            "in the session's memory file (same host), the packets say where"
            if shared
            else f"in the packets ({peers.packets_why})"
        )
    )
    print_table(rows)
    print(
        f"ceiling: msgpack frames over one asyncio TCP connection {peers.tcp_path} -> "
        "bench/rmi_ceiling_server.py (no naming, signature or task per call)"
    )
    print_ceiling(rows)
    print("Interests through the forwarder per rmi call: " + ", ".join(per_call))
    print("answers through the memory file per rmi call: " + ", ".join(local))
    if peers.link is not None:
        print("on the veth per rmi call: " + "; ".join(on_link))
        for line in peers.link.notes(link_moved):
            print(line)
    print(
        f"first call of a session (full exchange; {args.first_calls} fresh clients, 1 in flight): "
        + ", ".join(
            f"{size_label(size)} p50 {cell.ms(50):.2f} ms p99 {cell.ms(99):.2f} ms"
            for size, cell, _, _ in firsts
        )
    )
    print(
        "  sessions agreed: "
        + ", ".join(f"{size_label(s)} {agreed}/{args.first_calls}" for s, _, agreed, _ in firsts)
        + "; Interests through the forwarder per first call: "
        + ", ".join(f"{size_label(s)} {per:.1f}" for s, _, _, per in firsts)
    )
    for size, cell, _, _ in firsts:
        if cell.errors:
            print(f"  rmi first call {size_label(size)} errors: {dict(cell.errors)}")
    named = [(f"{size_label(size)} x{conc}", r, g, c) for size, conc, r, g, c in rows]
    print(ratio_line("rmi/ceiling", [(n, r, c) for n, r, _, c in named], "rmi", "ceiling"))
    print(ratio_line("grpc/ceiling", [(n, g, c) for n, _, g, c in named], "grpc", "ceiling"))
    print(ratio_line("rmi/grpc", [(n, r, g) for n, r, g, _ in named], "rmi", "grpc"))
    return sum(1 for *_, r, g, c in rows if r.failed or g.failed or c.failed)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="short run: 1 round of 1 s per cell, 20 first calls"
    )
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per round and side")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per cell, sides alternating")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per cell, side")
    ap.add_argument("--concurrency", type=parse_ints, default=[1, 64], help="e.g. 1,64")
    ap.add_argument("--sizes", type=parse_ints, default=[100, 65536], help="argument bytes")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per call at most")
    ap.add_argument(
        "--payloads",
        choices=["shared", "packets"],
        help="shared (the default on one host): large payloads in a memory file (client and "
        "server share this host); packets: in the packets, as between hosts (--netns: always)",
    )
    ap.add_argument(
        "--netns",
        action="store_true",
        help="client and servers on two hosts: network namespaces joined by a veth, a forwarder "
        "in each, a UDP face between them (root; see bench/rmi_netns.py)",
    )
    ap.add_argument("--inside-netns", help=argparse.SUPPRESS)  # --netns's measuring child
    ap.add_argument(
        "--first-calls", type=int, help="fresh rmi clients per size, one call each (default 40)"
    )
    ap.add_argument(
        "--grpc-loop",
        choices=["auto", "asyncio"],
        default="auto",
        help="the grpc server's loop: auto, uvloop when installed (as every other process); "
        "asyncio: asyncio's loop",
    )
    args = ap.parse_args()
    if args.quick:
        args.duration, args.rounds, args.warmup = 1.0, 1, 0.3
    if args.first_calls is None:
        args.first_calls = 20 if args.quick else 40
    if args.first_calls < 1:
        ap.error(f"--first-calls {args.first_calls}: give 1 or more fresh clients per size")
    netns = args.netns or args.inside_netns
    if netns and args.payloads == "shared":
        ap.error("--netns --payloads shared: the two hosts share no memory file; leave it out")
    args.payloads = args.payloads or ("packets" if netns else "shared")
    try:
        import grpc
    except ImportError:
        sys.exit("bench/rmi.py needs grpcio for its peer: pip install -e .[bench]")
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run  # type: ignore[assignment]  # uvloop.run takes fewer options
    if args.netns and not args.inside_netns:
        missing = rmi_netns.preflight()
        if missing:
            sys.exit(missing)
        try:
            code = rmi_netns.launch(
                sys.argv[1:],
                PREFIX,
                rmi_server_argv,
                functools.partial(tcp_server_argv, grpc_loop=args.grpc_loop),
            )
        except KeyboardInterrupt:
            sys.exit("interrupted; processes stopped, namespaces and temporary files removed")
        sys.exit(code)
    try:
        failed = run(inside_netns(args) if args.inside_netns else main(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        sys.exit("interrupted; child processes stopped, temporary files removed")
    sys.exit(1 if failed else 0)
