"""One worker process of bench/allreduce.py: ours (compute/collective) or torch.distributed gloo.

Driven by JSON lines on stdin, answering one JSON line on stdout per command (logs go to
stderr), so the bench can read the forwarder's counters between warm-up and timed rounds:
  {"cmd": "warm", "mib": S}     make this rank's input (seeded, see make_input), wait for the
                                others, one untimed allreduce; answers its result's digest
  {"cmd": "time", "repeat": R}  R times: wait for the others (barrier), time one allreduce;
                                answers the times and the digest of each result
  {"cmd": "quit"}               close and exit
On start it prints {"ready": ..., "face": ...} once its routes are registered (ours) or the
process group is up (gloo).  A failure answers {"error": "..."}; the bench then fails loudly.

Run from the repository root (the bench does this):
    python -m bench.allreduce_worker ours --rank 0 --world 4 --connect unix:///tmp/f.sock
    python -m bench.allreduce_worker gloo --rank 0 --world 4 --init tcp://127.0.0.1:29500
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from compute.collective import Plan

JOB = "/ar"
ROOT = "ps"  # the aggregator of the flat plan (in-network and parameter-server modes)
MiB = 1 << 20


def make_input(mib: int, rank: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Rank ``rank``'s array of ``mib`` MiB of float32; the bench rebuilds it to check sums."""
    rng = np.random.default_rng([20261121, mib, rank])
    return rng.standard_normal(mib * MiB // 4, dtype=np.float32)


def digest(array: np.ndarray[Any, Any]) -> str:
    return hashlib.blake2b(np.ascontiguousarray(array).data, digest_size=16).hexdigest()


def sumsq(array: np.ndarray[Any, Any]) -> float:
    """With :func:`sample`, a check of results that need not be bit-exact (gloo's own order)."""
    flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    return float(np.dot(flat, flat))


def sample(array: np.ndarray[Any, Any], count: int = 1024) -> list[float]:
    """``count`` items spread over the whole array."""
    flat = np.asarray(array).reshape(-1)
    return [float(x) for x in flat[:: max(1, len(flat) // count)][:count]]


def load_plan(path: str | None, world: int) -> Plan:
    """The plan in the JSON file ``path`` (``job``, ``workers``, ``root``, ``children``, as
    :func:`plan_json` writes it), else the flat plan of ``world`` workers under :data:`ROOT`."""
    from compute.collective import Plan

    if path is None:
        return Plan.flat(JOB, [str(i) for i in range(world)], root=ROOT)
    with open(path) as f:
        spec = json.load(f)
    children = {agg: tuple(kids) for agg, kids in spec["children"].items()}
    return Plan(spec["job"], tuple(spec["workers"]), spec["root"], children)


def plan_json(plan: Plan) -> str:
    """``plan`` as :func:`load_plan` reads it."""
    children = {agg: list(kids) for agg, kids in plan.children.items()}
    spec = {"job": plan.job, "workers": list(plan.workers), "root": plan.root}
    return json.dumps({**spec, "children": children})


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop when installed (as the forwarder does), else asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


def answer(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---- ours ------------------------------------------------------------------------------------


async def run_ours(args: argparse.Namespace) -> None:
    from compute.collective import Collective
    from icn.dataplane.endpoint import Endpoint

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    ep = await Endpoint.connect(args.connect)
    plan = load_plan(args.plan, args.world)
    coll = Collective(
        plan,
        str(args.rank),
        ep,
        mode=args.mode,
        chunk_bytes=None if args.chunk_kib is None else args.chunk_kib * 1024,
        window=args.window,
        deadline=args.deadline,
        lifetime_ms=args.lifetime_ms,
        signature=args.signature,
        shared=args.payloads == "shared",
    )
    await coll.start()

    def report() -> None:
        # SIGUSR1: where this worker is (a stalled run can be asked before it times out)
        print(f"worker {args.rank} round {coll.round}: {json.dumps(coll.stats())}", file=sys.stderr)
        for task in asyncio.all_tasks():
            task.print_stack(limit=8, file=sys.stderr)
        sys.stderr.flush()

    loop.add_signal_handler(signal.SIGUSR1, report)
    answer({"ready": args.rank, "face": ep.face_id})
    array: np.ndarray[Any, Any] | None = None
    try:
        while True:
            line = await reader.readline()
            if not line:
                return  # the bench is gone
            cmd = json.loads(line)
            try:
                if cmd["cmd"] == "quit":
                    print(
                        f"worker {args.rank} counters: {json.dumps(coll.stats())}", file=sys.stderr
                    )
                    answer({"bye": args.rank, "stats": coll.stats()})
                    return
                if cmd["cmd"] == "warm":
                    array = None  # free the last size's input first
                    array = make_input(int(cmd["mib"]), args.rank)
                    await coll.barrier()
                    answer({"digests": [digest(await coll.allreduce(array, "sum"))]})
                elif cmd["cmd"] == "time":
                    assert array is not None, "time before warm"
                    answer(await timed(coll.barrier, coll.allreduce, array, int(cmd["repeat"])))
            except Exception as exc:
                answer({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        await coll.close()
        ep.close()


async def timed(
    barrier: Callable[[], Awaitable[None]],
    allreduce: Callable[..., Awaitable[np.ndarray[Any, Any]]],
    array: np.ndarray[Any, Any],
    repeat: int,
) -> dict[str, Any]:
    """``repeat`` rounds of a barrier and a timed allreduce into a result array made (and its
    pages touched) before the clock starts, as gloo's rounds work on a clone made before
    theirs; the digests are taken after the last round, so no worker hashes while the others
    still work."""
    times: list[float] = []
    outs: list[np.ndarray[Any, Any]] = []
    cpu = 0.0
    for _ in range(repeat):
        out = np.empty_like(array)
        out.fill(0)  # its pages now exist: np.zeros would leave them to fault in the round
        await barrier()
        c0, t0 = time.process_time(), time.perf_counter()
        outs.append(await allreduce(array, "sum", out=out))
        times.append(time.perf_counter() - t0)
        cpu += time.process_time() - c0
    return {"times": times, "cpu": cpu, "digests": [digest(out) for out in outs]}


# ---- gloo ------------------------------------------------------------------------------------


def run_gloo(args: argparse.Namespace) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=args.init,
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=args.deadline),
    )
    answer({"ready": args.rank, "face": None, "torch": torch.__version__})
    src: torch.Tensor | None = None
    work: torch.Tensor | None = None
    try:
        for line in sys.stdin:
            cmd = json.loads(line)
            try:
                if cmd["cmd"] == "quit":
                    answer({"bye": args.rank, "stats": {}})
                    return
                if cmd["cmd"] == "warm":
                    src = work = None
                    src = torch.from_numpy(make_input(int(cmd["mib"]), args.rank))
                    work = src.clone()
                    dist.barrier()
                    dist.all_reduce(work)
                    answer({"sumsq": [sumsq(work.numpy())], "samples": [sample(work.numpy())]})
                elif cmd["cmd"] == "time":
                    assert src is not None and work is not None, "time before warm"
                    times: list[float] = []
                    outs: list[torch.Tensor] = []
                    cpu = 0.0
                    for _ in range(int(cmd["repeat"])):
                        work = src.clone()  # all_reduce works in place
                        dist.barrier()
                        # process_time: every thread of the process, gloo's too
                        c0, t0 = time.process_time(), time.perf_counter()
                        dist.all_reduce(work)
                        times.append(time.perf_counter() - t0)
                        cpu += time.process_time() - c0
                        outs.append(work)
                    squares = [sumsq(out.numpy()) for out in outs]
                    samples = [sample(out.numpy()) for out in outs]
                    answer({"times": times, "cpu": cpu, "sumsq": squares, "samples": samples})
            except Exception as exc:
                answer({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("kind", choices=["ours", "gloo"])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--connect", help="ours: forwarder URI, e.g. unix:///tmp/fwd.sock")
    ap.add_argument("--plan", help="ours: the plan's JSON file (default: flat, root 'ps')")
    ap.add_argument("--mode", choices=["tree", "ring"], default="tree", help="ours: tree or ring")
    ap.add_argument("--chunk-kib", type=int, help="ours: KiB per chunk (default: the library's)")
    ap.add_argument("--window", type=int, default=8, help="ours: chunks in flight")
    ap.add_argument("--lifetime-ms", type=int, default=1000, help="ours: Interest lifetime")
    ap.add_argument("--signature", default="digest", help="ours: chunks' signature, digest or null")
    ap.add_argument(
        "--payloads",
        choices=["packets", "shared"],
        default="packets",
        help="ours: chunks in the packets, or in shared memory referred to by them (one host)",
    )
    ap.add_argument("--init", help="gloo: init_method, e.g. tcp://127.0.0.1:29500")
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds per operation")
    ap.add_argument("--profile", help="write a cProfile of this process to this file")
    args = ap.parse_args()
    # CPU time, not wall time: nine processes share two cores, so waits would blur the split
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    if profiler is not None:
        profiler.enable()
    try:
        if args.kind == "gloo":
            run_gloo(args)
        else:
            run(run_ours(args))
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
