"""Scenario entry ``apps.ddp_entries:ddp_worker``: one rank of a DistributedDataParallel job
(:mod:`apps.demos.ddp_example`) over torch.distributed's backend ``icn``, aggregated in the network.

The workload runs the example script as a child process (torch stays out of the launcher's
processes; a stop of the workload stops it by PID) with the backend's configuration in its
environment:

- ``ICN_TORCH_PLAN``: the job's plan, computed from the scenario's links as for the other
  collective entries (:func:`apps.collective_entries.job_plan`), written to a JSON file; the
  worker's place in ``args.workers`` is its rank, their count the world size;
- ``NDN_CLIENT_TRANSPORT``: this node's forwarder, where the aggregator services announced the
  job's prefixes;
- the rendezvous: a torch FileStore in the run's directory (every node's processes see it, on
  the local and the netns backends), named after the run so a reused ``--out`` holds no stale
  one.

Arguments: the job's (``job``, ``workers``, ``aggregators``... as in
:mod:`apps.collective_entries`) and ``worker`` (default: the workload's name), ``epochs`` (3),
``batch`` (64, the global batch), ``seed`` (0), ``hidden`` (32), ``lr`` (0.5), ``backend``
(icn), ``chunk`` and ``window`` (the backend's chunk size in bytes and Interests in flight).

The workload records one operation, ok when the training ended and every rank's final
parameters hash the same (the example gathers the hashes); its metrics are ``accuracy``,
``loss_epoch1``, ``loss_epoch2``... and ``step_ms`` (median time per step, the slowest rank's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from apps.collective_entries import job_plan, parse_size
from apps.scenario.entry import WorkloadContext
from apps.workloads import _arg

STOP_GRACE = 5.0  # seconds the training process gets to exit on SIGTERM before SIGKILL


def run_key(transport: str) -> str:
    """A name unique to this run that every workload of it derives alike: the directory of
    the forwarders' Unix sockets (``icn-<run id>``)."""
    if transport.startswith("unix://"):
        return Path(transport.removeprefix("unix://")).parent.name
    return "run"  # not a Unix socket: the run's directory is taken as fresh


def _options(args: dict[str, Any]) -> list[str]:
    argv = ["--backend", str(args.get("backend", "icn"))]
    for key in ("epochs", "batch", "seed", "hidden"):
        if key in args:
            argv += [f"--{key}", str(_arg(args, key, 0, int))]
    if "lr" in args:
        argv += ["--lr", str(_arg(args, "lr", 0.0, float))]
    return argv


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await asyncio.wait_for(proc.wait(), STOP_GRACE)


def _verdict(code: int | None, out: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The rank's summary and what went wrong (None: nothing)."""
    if code != 0:
        return None, f"the training process exited with code {code} (see this workload's log)"
    try:
        summary: dict[str, Any] = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        return None, f"no summary from the training process: {exc}"
    hashes = summary.get("param_hashes", [])
    if len(hashes) != summary.get("world_size") or set(hashes) != {summary.get("param_hash")}:
        return summary, "the ranks' final parameters differ"
    return summary, None


async def ddp_worker(ctx: WorkloadContext) -> None:
    """Train as rank ``args.workers``' index of ``args.worker`` and report the result."""
    plan = job_plan(ctx)
    worker = str(ctx.args.get("worker", ctx.name))
    if worker not in plan.workers:
        raise SystemExit(f"args.worker: {worker!r} is not in args.workers {list(plan.workers)}")
    workdir = ctx.run_dir / "ddp"
    workdir.mkdir(parents=True, exist_ok=True)
    plan_path = workdir / f"{worker}.plan.json"
    plan_path.write_text(json.dumps(plan.to_dict()))
    store = workdir / f"{plan.job.strip('/').replace('/', '-')}-{run_key(ctx.transport)}.store"
    rank, world = plan.workers.index(worker), len(plan.workers)
    # "{rank}" in --out: every rank writes its summary, not only rank 0
    out_arg = str(workdir / f"{worker}.rank{{rank}}.json")
    out = Path(out_arg.replace("{rank}", str(rank)))
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        "ICN_TORCH_PLAN": str(plan_path),
        "NDN_CLIENT_TRANSPORT": ctx.transport,
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
    }
    if "chunk" in ctx.args:
        env["ICN_TORCH_CHUNK"] = str(parse_size(ctx.args["chunk"], "chunk"))
    if "window" in ctx.args:
        env["ICN_TORCH_WINDOW"] = str(_arg(ctx.args, "window", 16, int))
    argv = [sys.executable, "-m", "apps.demos.ddp_example", *_options(ctx.args)]
    # torch's file:// rendezvous reads the rank and world size from the URL, not the environment
    argv += ["--init-method", f"file://{store}?rank={rank}&world_size={world}", "--out", out_arg]
    sent = time.time()
    # the child's output goes where this workload's goes: the run's logs
    proc = await asyncio.create_subprocess_exec(*argv, env=env)
    try:
        code = await proc.wait()  # bounded by the launcher: past the workload's time, cancelled
    finally:
        await _stop(proc)
    summary, error = _verdict(code, out)
    if summary is not None and rank == 0:  # the job's figures, once (every rank has them)
        ctx.metric("accuracy", float(summary["accuracy"]))
        for epoch, loss in enumerate(summary["losses"], 1):
            ctx.metric(f"loss_epoch{epoch}", float(loss))
        ctx.metric("step_ms", 1000 * float(summary["median_step_time"]))
    took = float(summary["took"]) if summary is not None else time.time() - sent
    ctx.record(error is None, took, sent=sent, error=error)
    if summary is None or error is not None:
        ctx.log(str(error))
    else:
        losses = ", ".join(f"{v:.4f}" for v in summary["losses"])
        ctx.log(f"accuracy {summary['accuracy']:.4f}, loss by epoch {losses}")
