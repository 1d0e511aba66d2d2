"""Allreduce over named data (compute/collective) against torch.distributed's gloo, same run.

For each worker count N and size S (MiB of float32), every mode runs N worker processes
(bench/allreduce_worker.py), each with its own input from a seeded generator:
  gloo:        torch.distributed, gloo backend, CPU, TCP on 127.0.0.1 (the peer)
  in-network:  one forwarder process; the root aggregator runs inside it on an in-memory face
               (bench/allreduce_host.py); the workers reach it over the Unix socket
  ps:          the same flat plan, the aggregator as its own process on the Unix socket
               (parameter server)
  ring:        ring allreduce among the workers through the forwarder, no aggregator
Each worker waits for the others (barrier), runs one untimed allreduce, then --repeat times: a
barrier, then one timed allreduce.  The time of a round is the slowest worker's; the table
shows the median round.  Every result is checked: bit for bit against numpy's sum in the
plan's order (ring: compute.collective.ring_reference), gloo's within 1e-3 (its own order); a
wrong result fails the benchmark.  Bytes received by the root: for ours, what the forwarder
sent to the root's face (the aggregator's; ring: worker 0's) during the timed rounds, from its
faces/list counters; for gloo, the ring algorithm's 2(N-1)/N*S per rank (theory, not measured).
The ratios are our time / gloo's time (below 1 favours ours).

Every process runs on this host, so in-network and ps pass the chunks' bytes in shared memory
(compute/collective/shared.py): each Data carries a reference to its bytes in the producer's
memory file, and the root's bytes received are those references.  --payloads packets puts the
bytes in the packets, through the Unix sockets and the forwarder, as between hosts.

Run: .venv/bin/python bench/allreduce.py [--quick] [--workers 2,4,8] [--sizes 1,16,64]
     [--repeat 3] [--chunk-kib K] [--window 8] [--modes gloo,in-network,ps,ring]
     [--payloads shared|packets] [--signature digest|null]
The gloo peer needs torch: pip install -e .[bench]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from apps.procs import Child, ProcessGroup, icn_argv  # noqa: E402
from bench.allreduce_worker import (  # noqa: E402
    JOB,
    MiB,
    digest,
    make_input,
    run,
    sample,
    sumsq,
)
from bench.arguments import parse_choices, parse_ints  # noqa: E402
from compute.collective import LOCAL_CHUNK, SHARED_CHUNK, Plan, ring_reference  # noqa: E402
from icn.dataplane import mgmt_client  # noqa: E402
from icn.dataplane.endpoint import Endpoint  # noqa: E402

HOST = "127.0.0.1"
MODES = ("gloo", "in-network", "ps", "ring")
OURS = ("in-network", "ps", "ring")
SKIP_GLOO = "gloo: skipped (pip install -e .[bench])"
CHILD_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.getenv("PYTHONPATH"))))}


class BenchError(Exception):
    """A process failed, timed out or returned a wrong result: the run stops here."""


@dataclass
class Result:
    """One mode at one worker count and size."""

    rounds: list[float]  # seconds per timed round, the slowest worker's
    root_bytes: float  # per allreduce; for gloo the theoretical ring volume
    cpu: dict[str, float]  # CPU seconds per allreduce by role: fwd, agg, workers (all)

    @property
    def seconds(self) -> float:
        return statistics.median(self.rounds)


@dataclass
class Reference:
    flat: str  # digest of the sum in the plan's order (the flat plan: worker order)
    ring: str  # digest of what ring allreduce computes
    sumsq: float  # and a sample of the sum, for gloo's result (its own order, not the bits)
    sample: list[float]


@dataclass
class Worker:
    """A worker process driven by JSON lines on its stdin and stdout."""

    name: str
    proc: asyncio.subprocess.Process
    stderr_path: Path

    def tail(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    async def recv(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        except TimeoutError:
            raise BenchError(
                f"{self.name}: no answer within {timeout:g} s\n{self.tail()}"
            ) from None
        if not line:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 5)
            code = self.proc.returncode
            raise BenchError(f"{self.name} closed its output (exit code {code}):\n{self.tail()}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise BenchError(f"{self.name}: {reply['error']}")
        return reply

    async def request(self, cmd: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        await self.proc.stdin.drain()
        return await self.recv(timeout)

    async def stop(self, grace: float = 5.0) -> None:
        """End of input (a worker exits on it), then SIGTERM, then SIGKILL, by PID."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        for action in (None, signal.SIGTERM, signal.SIGKILL):
            if self.proc.returncode is not None:
                return
            if action is not None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.send_signal(action)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), grace)


async def start_worker(
    name: str, argv: list[str], workdir: Path, env: dict[str, str] | None = None
) -> Worker:
    """``env`` is added to the worker's environment (by default gloo's connections go over
    loopback, whatever the host name resolves to)."""
    stderr_path = workdir / f"{name}.err"
    env = {**os.environ, **CHILD_ENV, "GLOO_SOCKET_IFNAME": "lo", **(env or {})}
    with open(stderr_path, "wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=env,
            cwd=ROOT,
            # one answer is one line: gloo's carries 1024 samples per round (64 KiB each
            # at about six rounds, asyncio's default limit)
            limit=16 << 20,
        )
    return Worker(name, proc, stderr_path)


async def all_request(
    workers: list[Worker], cmd: dict[str, Any], timeout: float
) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(w.request(cmd, timeout) for w in workers)))


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


async def face_out_bytes(ep: Endpoint | None, face_id: int | None) -> int:
    """Bytes the forwarder has sent on face ``face_id`` (its faces/list counter); 0 when there
    is no forwarder (gloo)."""
    if ep is None or face_id is None:
        return 0
    faces = mgmt_client.parse_face_list(await mgmt_client.dataset(ep, "faces", "list"))
    for face in faces:
        if face.get("face_id") == face_id:
            return int(face.get("n_out_bytes", 0))
    raise BenchError(f"face {face_id} is not in the forwarder's face list")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of process ``pid`` so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, IndexError, ValueError):
        return float("nan"), float("nan")


def references(n: int, sizes: list[int], plan: Plan | None = None) -> dict[int, Reference]:
    """What every worker must get, from the same seeded inputs the workers make; ours folds
    in ``plan``'s order (default: the flat plan of ``n`` workers)."""
    out: dict[int, Reference] = {}
    plan = plan or Plan.flat(JOB, [str(i) for i in range(n)])
    for mib in sizes:
        arrays = [make_input(mib, r) for r in range(n)]
        flat = plan.reference(dict(zip(plan.workers, arrays, strict=True)), "sum")
        ring = digest(ring_reference(arrays, "sum"))
        out[mib] = Reference(digest(flat), ring, sumsq(flat), sample(flat))
        del arrays, flat
    return out


def check(mode: str, mib: int, ref: Reference, replies: list[dict[str, Any]]) -> None:
    """Every worker's every result must be right; BenchError naming the first that is not."""
    for rank, reply in enumerate(replies):
        if mode == "gloo":
            for got, items in zip(reply["sumsq"], reply["samples"], strict=True):
                if abs(got - ref.sumsq) > 1e-3 * ref.sumsq or not np.allclose(
                    items, ref.sample, rtol=1e-4, atol=1e-5
                ):
                    raise BenchError(
                        f"gloo N={len(replies)} {mib} MiB: rank {rank}'s result is off "
                        f"(sum of squares {got:.6g}, expected {ref.sumsq:.6g})"
                    )
            continue
        want = ref.ring if mode == "ring" else ref.flat
        for got in reply.get("digests", []):
            if got != want:
                raise BenchError(
                    f"{mode} N={len(replies)} {mib} MiB: worker {rank}'s result differs from "
                    "numpy's sum in the same order (not the same bits)"
                )


@dataclass
class Servers:
    """What a mode of ours runs besides its workers: the forwarder, maybe an aggregator."""

    sock: Path
    fwd: Child  # the forwarder process (in-network: with the aggregator in it)
    agg: Child | None = None  # ps: the aggregator process
    root_face: int | None = None  # the root's face in the forwarder (ring: set from worker 0)

    def pids(self) -> dict[str, int]:
        return {"fwd": self.fwd.pid, **({"agg": self.agg.pid} if self.agg else {})}

    def aggregator_counters(self) -> dict[str, Any]:
        """What the aggregator printed when it stopped (empty before, or in ring mode)."""
        child = self.agg or self.fwd
        text = child.output().rsplit("aggregator counters: ", 1)
        return json.loads(text[1].splitlines()[0]) if len(text) == 2 else {}


def ready_face(child: Child) -> int:
    child.wait_for("ready face=", stream="stdout")
    return int(child.output().split("ready face=", 1)[1].split()[0])


def chunk_kib_of(args: argparse.Namespace, mode: str) -> int:
    """KiB per chunk in ``mode``: --chunk-kib, or the library's default for its payloads."""
    if args.chunk_kib is not None:
        return int(args.chunk_kib)
    shared = mode != "ring" and args.payloads == "shared"
    return (SHARED_CHUNK if shared else LOCAL_CHUNK) // 1024


def chunk_sizes(args: argparse.Namespace) -> str:
    tree, ring = chunk_kib_of(args, "ps"), chunk_kib_of(args, "ring")
    return f"{tree} KiB" + ("" if ring == tree else f" (ring: {ring} KiB)")


def start_servers(mode: str, n: int, group: ProcessGroup, args: argparse.Namespace) -> Servers:
    sock = group.workdir / "fwd.sock"
    host = [sys.executable, "-m", "bench.allreduce_host", "--workers", str(n)]
    host += ["--signature", args.signature, "--payloads", args.payloads]
    if mode == "in-network":
        argv = [*host, "--unix", str(sock)]
        if args.profile:
            argv += ["--profile", str(Path(args.profile) / f"host-n{n}.prof")]
        fwd = group.start("host", argv, CHILD_ENV)
        return Servers(sock, fwd, root_face=ready_face(fwd))
    fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)), CHILD_ENV)
    fwd.wait_for("forwarder ready", stream="stderr")
    if mode == "ring":
        return Servers(sock, fwd)
    agg = group.start("agg", [*host, "--connect", f"unix://{sock}"], CHILD_ENV)
    return Servers(sock, fwd, agg, ready_face(agg))


async def run_mode(
    mode: str,
    n: int,
    refs: dict[int, Reference],
    args: argparse.Namespace,
    workdir: Path,
) -> tuple[dict[int, Result], dict[str, int]]:
    """All sizes of ``mode`` with ``n`` workers: one set of processes, stopped at the end.
    Returns the results by size, and counters of trouble: Interests the workers and the
    aggregator retransmitted, packets the forwarder dropped for a full send queue."""
    d = Path(tempfile.mkdtemp(prefix=f"{mode}-n{n}-", dir=workdir))
    group = ProcessGroup(d)
    workers: list[Worker] = []
    ep: Endpoint | None = None
    servers: Servers | None = None
    try:
        argv = [sys.executable, "-m", "bench.allreduce_worker", "--world", str(n)]
        argv += ["--deadline", str(args.timeout)]
        if mode == "gloo":
            argv += ["--init", f"tcp://{HOST}:{free_tcp_port()}", "gloo"]
        else:
            servers = start_servers(mode, n, group, args)
            ep = await Endpoint.connect(f"unix://{servers.sock}")
            chunk_kib = chunk_kib_of(args, mode)
            argv += ["--connect", f"unix://{servers.sock}", "--chunk-kib", str(chunk_kib)]
            argv += ["--window", str(args.window), "--mode", "ring" if mode == "ring" else "tree"]
            argv += ["--signature", args.signature]
            # the ring's steps are pulled between workers: always packets
            argv += ["--payloads", "packets" if mode == "ring" else args.payloads]
            argv += ["ours"]
        for r in range(n):
            extra = ["--rank", str(r)]
            if args.profile and r == 0:
                extra += ["--profile", str(Path(args.profile) / f"{mode}-w0-n{n}.prof")]
            workers.append(await start_worker(f"{mode}-w{r}", [*argv, *extra], d))
        ready = await asyncio.gather(*(w.recv(args.timeout) for w in workers))
        if servers is not None and mode == "ring":
            servers.root_face = ready[0]["face"]
        results = {}
        for mib in args.sizes:
            results[mib] = await measure(mode, n, mib, workers, servers, ep, refs[mib], args)
        byes = await all_request(workers, {"cmd": "quit"}, args.timeout)
        trouble = {"workers": sum(b["stats"].get("interests_retransmitted", 0) for b in byes)}
        if servers is not None:
            fwd_counters = servers.fwd.counters()
            trouble["drops"] = fwd_counters.get("face.drop_send_queue_full", 0)
            group.stop_all()  # the aggregator prints its counters as it stops
            if mode != "ring":
                agg = servers.aggregator_counters()
                trouble["aggregator"] = agg.get("interests_retransmitted", 0)
        return results, trouble
    finally:
        await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
        if ep is not None:
            ep.close()
        group.stop_all()
        if args.keep:
            print(f"  logs kept in {d}", file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)


async def measure(
    mode: str,
    n: int,
    mib: int,
    workers: list[Worker],
    servers: Servers | None,
    ep: Endpoint | None,
    ref: Reference,
    args: argparse.Namespace,
) -> Result:
    """One cell: a warm-up, then the timed rounds, with the root's bytes and the CPU used."""
    check(mode, mib, ref, await all_request(workers, {"cmd": "warm", "mib": mib}, args.timeout))
    repeat = args.repeat_large if mib >= 64 and args.repeat_large else args.repeat
    root_face = servers.root_face if servers else None
    pids = servers.pids() if servers else {}
    before = await face_out_bytes(ep, root_face)
    cpu0 = {role: cpu_seconds(pid) for role, pid in pids.items()}
    replies = await all_request(workers, {"cmd": "time", "repeat": repeat}, args.timeout)
    cpu1 = {role: cpu_seconds(pid) for role, pid in pids.items()}
    after = await face_out_bytes(ep, root_face)
    check(mode, mib, ref, replies)
    cpu = {role: (sum(cpu1[role]) - sum(cpu0[role])) / repeat for role in pids}
    cpu["workers"] = sum(r["cpu"] for r in replies) / repeat
    rounds = [max(t) for t in zip(*(r["times"] for r in replies), strict=True)]
    # gloo: the ring algorithm's volume per rank, as nothing counts what gloo's ranks receive
    theory = 2 * (n - 1) / n * mib * MiB
    root_bytes = theory if mode == "gloo" else (after - before) / repeat
    kernel = "".join(
        f"; {role} cpu {1000 * cpu[role]:.0f} ms, "
        f"{1000 * (cpu1[role][1] - cpu0[role][1]) / repeat:.0f} in kernel"
        for role in pids
    )
    print(
        f"  N={n} {mib} MiB {mode}: {1000 * statistics.median(rounds):.1f} ms "
        f"(rounds: {', '.join(f'{1000 * t:.1f}' for t in rounds)}){kernel}",
        file=sys.stderr,
        flush=True,
    )
    return Result(rounds, root_bytes, cpu)


def print_table(rows: dict[tuple[int, int], dict[str, Result]], modes: list[str]) -> None:
    head = (
        f"{'workers':>7} {'size':>6}  {'mode':<10} | {'ms':>7} {'alg MB/s':>8} {'root MiB':>8} | "
        f"{'/ gloo':>6} | {'cpu ms: fwd':>11} {'agg':>5} {'workers':>7} {'/ gloo':>6}"
    )
    print(head)
    print("-" * len(head))
    for (n, mib), cells in rows.items():
        gloo = cells.get("gloo")
        for mode in modes:
            res = cells.get(mode)
            if res is None:
                continue
            ratio = f"{res.seconds / gloo.seconds:>6.2f}" if gloo and mode != "gloo" else " " * 6
            cpu_ratio = " " * 6
            if gloo and mode != "gloo" and gloo.cpu["workers"] > 0:
                cpu_ratio = f"{res.cpu['workers'] / gloo.cpu['workers']:>6.2f}"
            mark = "*" if mode == "gloo" else " "
            cpu = {k: f"{1000 * v:.0f}" for k, v in res.cpu.items()}
            if mode == "in-network":
                cpu["agg"] = "in fwd"
            print(
                f"{n:>7} {f'{mib} MiB':>6}  {mode:<10} | {1000 * res.seconds:>7.1f} "
                f"{mib * MiB / 1e6 / res.seconds:>8,.0f} {res.root_bytes / MiB:>7.2f}{mark} | "
                f"{ratio} | {cpu.get('fwd', ''):>11} {cpu.get('agg', ''):>5} {cpu['workers']:>7} "
                f"{cpu_ratio}"
            )
    print(
        "ms: median over rounds of the slowest worker's time; alg MB/s: size / time (10^6 B/s)\n"
        "root MiB: received by the root per allreduce, the bytes the forwarder sent to the\n"
        "  aggregator's face (ring: worker 0's), from its faces/list counters, Interests and\n"
        "  the barrier included; * gloo: 2(N-1)/N x size, the ring algorithm's volume per rank\n"
        "  (theory)\n"
        "/ gloo: time ratio, below 1 favours ours\n"
        "cpu ms: CPU time per allreduce of the forwarder process (in-network: with the\n"
        "  aggregator in it) and of the aggregator process (ps) over the timed rounds, and of\n"
        "  the allreduce calls of all workers together (their threads included); / gloo: the\n"
        "  workers' CPU over gloo's workers' CPU"
    )


async def main(args: argparse.Namespace) -> None:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    modes: list[str] = args.modes
    if "gloo" in modes and importlib.util.find_spec("torch") is None:
        print(SKIP_GLOO, flush=True)
        modes = [m for m in modes if m != "gloo"]
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-allreduce-"))
    rows: dict[tuple[int, int], dict[str, Result]] = {}
    trouble: dict[str, Counter[str]] = {m: Counter() for m in modes if m in OURS}
    started = time.monotonic()
    try:
        for n in args.workers:
            t0 = time.monotonic()
            refs = references(n, args.sizes)
            print(f"  N={n}: references in {time.monotonic() - t0:.1f} s", file=sys.stderr)
            for mode in modes:
                results, counts = await run_mode(mode, n, refs, args, workdir)
                for mib, res in results.items():
                    rows.setdefault((n, mib), {})[mode] = res
                if mode in trouble:
                    trouble[mode].update(counts)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    rows = dict(sorted(rows.items()))
    torch_version = ""
    if "gloo" in modes:
        import torch

        torch_version = f", torch {torch.__version__} gloo over TCP {HOST}"
    print(
        f"allreduce (sum) of float32, Python {platform.python_version()}, {os.cpu_count()} cores"
        f"{torch_version}\nours: chunks of {chunk_sizes(args)}, window {args.window}, one "
        f"forwarder process, Unix sockets, chunks signed: {args.signature}\npayloads: "
        + (
            "in shared memory (memfd), the packets carry references (ring: in the packets)"
            if args.payloads == "shared"
            else "in the packets"
        )
    )
    repeats = f"{args.repeat}" + (f" ({args.repeat_large} at 64 MiB+)" if args.repeat_large else "")
    print(
        f"1 warm-up and {repeats} timed allreduces per cell, all verified; run took {elapsed:.0f} s"
    )
    print_table(rows, modes)
    if trouble:
        print(
            "Interests retransmitted by the workers / by the aggregator, and packets the\n"
            "forwarder dropped on a full send queue (all cells, warm-ups included):\n  "
            + ", ".join(
                f"{m} {c['workers']} / {c['aggregator'] if m != 'ring' else '-'} / {c['drops']}"
                for m, c in trouble.items()
            )
        )
    if "gloo" in modes:
        parts = []
        for mode in modes:
            if mode == "gloo":
                continue
            ratios = [
                c[mode].seconds / c["gloo"].seconds
                for c in rows.values()
                if mode in c and "gloo" in c
            ]
            if ratios:
                parts.append(f"{mode} {statistics.geometric_mean(ratios):.2f}")
        print("ours/gloo time ratio (geometric mean): " + ", ".join(parts))


parse_modes = parse_choices(MODES)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 and 4 workers, 1 and 16 MiB, 1 round")
    ap.add_argument("--workers", type=parse_ints, default=[2, 4, 8], help="worker counts")
    ap.add_argument("--sizes", type=parse_ints, default=[1, 16, 64], help="MiB of float32")
    ap.add_argument("--repeat", type=int, default=3, help="timed allreduces per cell")
    ap.add_argument("--repeat-large", type=int, default=0, help="timed allreduces at 64 MiB+")
    ap.add_argument(
        "--chunk-kib",
        type=int,
        help="ours: KiB per chunk (default: 4096 in shared memory, 1024 in packets and ring)",
    )
    ap.add_argument("--window", type=int, default=8, help="ours: chunks in flight per worker")
    ap.add_argument(
        "--signature",
        choices=["digest", "null"],
        default="digest",
        help="ours: chunks' signature, DigestSha256 or NDN's NullSignature (nothing hashed)",
    )
    ap.add_argument(
        "--payloads",
        choices=["packets", "shared"],
        default="shared",
        help="ours (in-network, ps): chunks in shared memory (memfd) that the packets refer to "
        "(every process here is on one host), or in the packets",
    )
    ap.add_argument("--modes", type=parse_modes, default=list(MODES), help=",".join(MODES))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per command at most")
    ap.add_argument(
        "--profile", help="directory for cProfiles of the in-network host and of worker 0"
    )
    ap.add_argument("--keep", action="store_true", help="keep the processes' logs")
    args = ap.parse_args()
    if args.quick:
        args.workers, args.sizes, args.repeat = [2, 4], [1, 16], 1
    try:
        run(main(args))
    except BenchError as exc:
        sys.exit(f"FAILED: {exc}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        sys.exit("interrupted; child processes stopped, temporary files removed")
