"""One rank of tests/integration/collective/test_torch_backend.py (run as a process).

    python torch_rank.py MODE BACKEND RANK WORLD STORE_FILE OUT_DIR

``ops`` (BACKEND icn): every collective over every dtype, once through the default group (icn)
and once through a gloo group of every rank made in the same processes, both results saved to
OUT_DIR/RANK.npz as ``icn/NAME`` and ``gloo/NAME`` (the test compares them; numpy arrays, so
the test's process needs no torch).  ``kill``: one allreduce, then the last rank kills itself
mid-step and the others' next allreduce must fail; they write what they saw to
OUT_DIR/RANK.json.  ``errors`` (one rank): what the backend refuses, and the messages, to
OUT_DIR/0.json.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int8]
DTYPES += [torch.uint8]
OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
OPS["product"] = dist.ReduceOp.PRODUCT


def data(rank: int, k: int, dtype: torch.dtype, n: int = 37) -> torch.Tensor:
    """Seeded by rank and call; small integers, so a product of a few stays exact."""
    g = torch.Generator().manual_seed(1000 * rank + k)
    if dtype.is_floating_point:
        return (torch.rand(n, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, (n,), generator=g, dtype=dtype)


def ops(rank: int, world: int, group: Any = None) -> dict[str, torch.Tensor]:
    """Every collective through ``group`` (None: the default group, icn; else a gloo group)."""
    gloo = group is not None
    out: dict[str, torch.Tensor] = {}
    k = 0
    for dtype in DTYPES:
        for name, op in OPS.items():
            if dtype == torch.float16 and name == "product":
                continue  # gloo has no half-precision product
            k += 1
            t = data(rank, k, dtype)
            dist.all_reduce(t, op=op, group=group)
            out[f"allreduce {name} {dtype}"] = t
        k += 1
        t = data(rank, k, dtype, 12).reshape(3, 4)
        dist.broadcast(t, src=world - 1, group=group)
        out[f"broadcast {dtype}"] = t
        k += 1
        mine = data(rank, k, dtype, 5)
        got = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(got, mine, group=group)
        out[f"allgather {dtype}"] = torch.stack(got)
        k += 1
        flat = torch.empty(5 * world, dtype=dtype)
        dist.all_gather_into_tensor(flat, data(rank, k, dtype, 5), group=group)
        out[f"all_gather_into_tensor {dtype}"] = flat
        k += 1
        t = data(rank, k, dtype, 9)
        dist.reduce(t, dst=1, op=dist.ReduceOp.SUM, group=group)
        if rank == 1:
            out[f"reduce {dtype}"] = t
        k += 1
        dest = torch.empty(4, dtype=dtype)
        parts = [data(rank, k + i, dtype, 4) for i in range(world)]
        dist.reduce_scatter(dest, parts, group=group)
        out[f"reduce_scatter {dtype}"] = dest
        k += world
        dest = torch.empty(3, dtype=dtype)
        dist.reduce_scatter_tensor(dest, data(rank, k, dtype, 3 * world), group=group)
        out[f"reduce_scatter_tensor {dtype}"] = dest
    # AVG: gloo has none, so the test compares ours with gloo's SUM / world
    for dtype in (torch.float32, torch.float64):
        k += 1
        t = data(rank, k, dtype)
        if gloo:
            dist.all_reduce(t, group=group)
            t /= world
        else:
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
        out[f"allreduce avg {dtype}"] = t
    # a strided tensor: ours reduces its elements; gloo is given a contiguous copy
    k += 1
    base = data(rank, k, torch.float32, 40).reshape(8, 5)
    col = base[:, 2].contiguous() if gloo else base[:, 2]
    dist.all_reduce(col, group=group)
    out["allreduce strided"] = col.contiguous()
    # async work, waited on later, as DDP's hooks do
    k += 1
    t = data(rank, k, torch.float32)
    work = dist.all_reduce(t, async_op=True, group=group)
    assert work is not None
    fut = work.get_future()
    work.wait()
    out["allreduce async"] = fut.value()[0]
    dist.barrier(group=group)
    return out


def kill(rank: int, world: int, out_dir: Path) -> None:
    t = torch.ones(1000)
    dist.all_reduce(t)
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)  # mid-step: the others are in their allreduce
    started = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1000))
        seen = {"raised": None}
    except Exception as exc:  # what a training script would see
        seen = {"raised": type(exc).__name__, "message": str(exc)}
    seen["seconds"] = time.monotonic() - started
    (out_dir / f"{rank}.json").write_text(json.dumps(seen))
    os._exit(0)  # the group cannot be left cleanly with a rank gone


def errors(out_dir: Path) -> None:
    said: dict[str, str] = {}

    def attempt(name: str, call: object) -> None:
        try:
            call()  # type: ignore[operator]
            said[name] = "no error"
        except Exception as exc:
            said[name] = f"{type(exc).__name__}: {exc}"

    attempt("meta", lambda: dist.all_reduce(torch.ones(2, device="meta")))
    attempt("bfloat16", lambda: dist.all_reduce(torch.ones(2, dtype=torch.bfloat16)))
    attempt("band", lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), dist.ReduceOp.BAND))
    attempt("avg int", lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), dist.ReduceOp.AVG))
    attempt("new_group", lambda: dist.new_group([0]))
    t = torch.arange(4.0)
    dist.all_reduce(t)  # still works after the refusals
    said["after"] = str(t.tolist())
    (out_dir / "0.json").write_text(json.dumps(said))


def main() -> None:
    mode, backend, rank_s, world_s, store, out = sys.argv[1:7]
    if mode == "ops" and backend != "icn":
        sys.exit(f"ops: BACKEND must be icn (gloo's group is made beside it), got {backend}")
    rank, world, out_dir = int(rank_s), int(world_s), Path(out)
    torch.set_num_threads(1)
    timeout = timedelta(seconds=float(os.environ.get("RANK_TIMEOUT", "60")))
    dist.init_process_group(
        backend, init_method=f"file://{store}", rank=rank, world_size=world, timeout=timeout
    )
    if mode == "ops":
        # gloo's group over the same ranks, beside the default one: one set of processes (and
        # of torch imports) serves both backends
        gloo = dist.new_group(backend="gloo", timeout=timeout)
        results = {f"icn/{k}": v for k, v in ops(rank, world).items()}
        results |= {f"gloo/{k}": v for k, v in ops(rank, world, gloo).items()}
        arrays = {k: v.numpy() for k, v in results.items()}
        # what each half went through, for the test to check
        arrays["backends"] = np.array([dist.get_backend(), dist.get_backend(gloo)])
        np.savez(out_dir / f"{rank}.npz", **arrays)
    elif mode == "kill":
        kill(rank, world, out_dir)
    elif mode == "errors":
        errors(out_dir)
    dist.destroy_process_group()
    if backend == "gloo" or mode == "ops":
        # a process with a gloo group leaves without the interpreter's teardown, where torch's
        # gloo sometimes aborts (134); the icn group has shut down in destroy_process_group
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
