"""Scenario entries of the task platform: ``apps.tasks_entries:executor`` (a service: an
executor on its node, announcing ``/cfn/node/<id>``) and ``apps.tasks_entries:wordcount`` (a
workload: MapReduce word counts, each checked exactly)."""

from __future__ import annotations

import asyncio
import importlib
import time

from apps.scenario.entry import ServiceContext, WorkloadContext
from apps.workloads import _arg
from compute.tasks import TaskError, TaskLost, current
from compute.tasks.executor import Executor, ExecutorConfig
from compute.tasks.runtime import Runtime


async def executor(ctx: ServiceContext) -> None:
    """An executor named ``args.id`` (default: the node's name) running the tasks of
    ``args.modules`` (default: apps.demos.wordcount_tasks) in ``args.num_cpus`` slots (default
    1).  Announce ``/cfn/node/<id>`` for it.  Reports the metrics ``tasks_run`` and
    ``in_progress`` every ``args.metrics_every`` (default 0.5s)."""
    modules = ctx.args.get("modules", ["apps.demos.wordcount_tasks"])
    if isinstance(modules, str):
        modules = [modules]
    if not isinstance(modules, list) or not modules:
        raise SystemExit(f"args.modules: expected a module name or a list of them, got {modules!r}")
    for module in modules:  # a typo fails the run's start, not each task later
        try:
            importlib.import_module(str(module))
        except ImportError as exc:
            raise SystemExit(
                f"args.modules: cannot import {module!r} ({exc}); name a module on the "
                "scenario's PYTHONPATH, e.g. apps.demos.wordcount_tasks"
            ) from None
    config = ExecutorConfig(
        node_id=str(ctx.args.get("id", ctx.node)),
        modules=frozenset(str(m) for m in modules),
        num_cpus=_arg(ctx.args, "num_cpus", 1.0, float),
    )
    ep = await ctx.endpoint()
    ex = Executor(ep, config)
    await ex.start()

    def report() -> None:
        ctx.metric("tasks_run", ex.counters["tasks_run"])
        ctx.metric("in_progress", ex.in_progress)

    try:
        async with ctx.reporting(report):
            ctx.ready()
            await ep.wait_closed()
    finally:
        await ex.close()
        ctx.log(f"counters {dict(ex.counters)}")


async def wordcount(ctx: WorkloadContext) -> None:
    """Word counts one after another for the workload's duration (``args.jobs`` at most):
    ``args.chunks`` map tasks (default 32) of ``args.scale`` x 36 kB of text each (default 10)
    and one reduce; each job's counts checked exactly against what the text was built to hold
    (:func:`apps.demos.wordcount_tasks.expected_counts`): a record per job, ok only when every
    count is right.  Each job has its own seed (its tasks are new); metrics ``reexecuted``,
    ``arguments_rebuilt``, ``executors_suspected`` and ``from_network`` are the runtime's
    counters."""
    from apps.demos import wordcount_tasks as wc

    chunks = _arg(ctx.args, "chunks", 32, int)
    scale = _arg(ctx.args, "scale", 10, int)
    jobs = _arg(ctx.args, "jobs", 1_000_000, int)
    expected = wc.expected_counts(chunks, scale)
    runtime = await Runtime.on(await ctx.endpoint(), wait=10)
    current.runtime = runtime
    try:
        for seed in range(1, jobs + 1):
            if ctx.remaining <= 0:
                break
            sent = time.time()
            try:
                counts = [wc.count_chunk.remote(seed, i, scale) for i in range(chunks)]
                async with asyncio.timeout(max(ctx.remaining, 1.0) + 30):
                    total = await wc.merge_counts.remote(*counts)
            except (TaskError, TaskLost, TimeoutError) as exc:
                ctx.record(False, time.time() - sent, sent=sent, error=type(exc).__name__)
                ctx.log(f"job {seed} failed: {exc}")
                continue
            ok = total == expected
            ctx.record(ok, time.time() - sent, sent=sent, error=None if ok else "wrong counts")
            for counter in (
                "reexecuted",
                "arguments_rebuilt",
                "executors_suspected",
                "from_network",
            ):
                ctx.metric(counter, runtime.counters[counter])
            ctx.log(
                f"job {seed}: {'exact' if ok else 'WRONG'} counts in "
                f"{time.time() - sent:.2f} s; runtime {dict(runtime.counters)}"
            )
    finally:
        current.runtime = None
        await runtime.close(close_endpoint=False)
