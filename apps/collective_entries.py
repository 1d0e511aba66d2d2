"""Scenario entries for collective jobs (docs/design.md section 7):

- ``apps.collective_entries:aggregator``: a service, one per aggregator node of the job.
- ``apps.collective_entries:worker``: a workload that runs ``rounds`` allreduces of seeded
  arrays and checks every result, bit for bit, against the reduction numpy computes in the
  plan's order (each worker can rebuild every other worker's array from the seeds).
- ``apps.collective_entries:trainer``: a workload that trains the digits MLP data-parallel and
  checks the final weights against single-process training (:mod:`apps.demos.digits_mlp`).

All share the job's arguments (a YAML anchor keeps them in one place)::

    job: /ar                     # the job's name prefix
    workers: {w0: a, w1: a, ...} # worker id -> the node it runs on (its order is the rank)
    aggregators: [r, m1, m2]     # nodes with an aggregator service (the plan is computed
    root: r                      #   from the scenario's links; root optional)
    lifetime: 500ms              # Interest lifetime; a loss costs about this much
    member_timeout: 10s          # an aggregator's wait for a member (stragglers, dead workers)
    bypass_after: 1s             # silence of a child aggregator before it is bypassed
    deadline: 30s                # a worker's bound on one operation
    chunk: 8192                  # bytes per chunk (fits a packet on any path)

Counters go to the report as metrics: bytes re-sent by sources (``bytes_resent``), Interests
retransmitted after a loss, and the bytes that came back after one (``bytes_after_retx``); the
forwarders' ``fw.cs_hit_bytes`` says how much of it content stores served.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from apps.scenario.entry import ServiceContext, WorkloadContext
from apps.workloads import _arg
from compute.collective import OPS, Aggregator, Collective, CollectiveError, Plan
from compute.collective.errors import PlanError
from icn.units import parse_duration

METRIC_EVERY = 1.0  # seconds between metric reports
REPORTED = ("bytes_sent", "bytes_resent", "interests_retransmitted", "bytes_after_retx")


def parse_size(value: object, field: str) -> int:
    """Bytes from ``4096``, ``"64KiB"``, ``"1MiB"``."""
    units = {"gib": 1 << 30, "mib": 1 << 20, "kib": 1 << 10, "b": 1}
    if isinstance(value, int) and value >= 0:
        return value
    text = str(value).strip().lower()
    for suffix, factor in units.items():
        if text.endswith(suffix):
            try:
                return int(float(text[: -len(suffix)]) * factor)
            except ValueError:
                break
    raise SystemExit(f"args.{field}: expected a size such as 4096, 64KiB or 1MiB, got {value!r}")


def job_plan(ctx: ServiceContext) -> Plan:
    """The plan from ``args`` and the scenario's links (or ``args.plan`` given whole)."""
    args = ctx.args
    try:
        if "plan" in args:
            return Plan.from_dict(args["plan"])
        workers = args.get("workers")
        aggregators = args.get("aggregators")
        if not isinstance(workers, Mapping) or not workers:
            raise SystemExit("args.workers: map each worker id to its node, e.g. {w0: a}")
        if not isinstance(aggregators, list) or not aggregators:
            raise SystemExit("args.aggregators: list the nodes with an aggregator, e.g. [r]")
        return Plan.from_topology(
            str(args.get("job", "/ar")),
            ctx.links,
            {str(k): str(v) for k, v in workers.items()},
            [str(a) for a in aggregators],
            root=args.get("root"),
        )
    except PlanError as exc:
        raise SystemExit(f"args: {exc}") from None


def _seconds(args: Mapping[str, Any], key: str, default: str) -> float:
    return parse_duration(args.get(key, default))


async def _report(ctx: ServiceContext, counters: Mapping[str, int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for name in REPORTED:
            ctx.metric(name, float(counters.get(name, 0)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), METRIC_EVERY)
    for name in REPORTED:
        ctx.metric(name, float(counters.get(name, 0)))


async def aggregator(ctx: ServiceContext) -> None:
    """Aggregate for node ``args.node`` (default: the node this service runs on)."""
    plan = job_plan(ctx)
    node = str(ctx.args.get("node", ctx.node))
    agg = Aggregator(
        plan,
        node,
        await ctx.endpoint(),
        lifetime_ms=int(_seconds(ctx.args, "lifetime", "500ms") * 1000),
        member_timeout=_seconds(ctx.args, "member_timeout", "10s"),
        bypass_after=_seconds(ctx.args, "bypass_after", "1s"),
    )
    _export_metrics(ctx, agg)
    await agg.start()
    ctx.ready()
    stop = asyncio.Event()
    reporter = asyncio.ensure_future(_report(ctx, agg.counters, stop))
    try:
        await agg.ep.wait_closed()
    finally:
        stop.set()
        await asyncio.gather(reporter, return_exceptions=True)
        ctx.log(f"aggregator {node}: {agg.stats()}")
        await agg.close()


def seeded_array(worker: str, rnd: int, items: int, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """What ``worker`` contributes in round ``rnd``: any worker can rebuild it."""
    rng = np.random.default_rng([rnd, *worker.encode()])
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, size=items).astype(dtype)
    return rng.standard_normal(items).astype(dtype)


def _collective(ctx: ServiceContext, plan: Plan, ep: Any) -> Collective:
    worker = str(ctx.args.get("worker", ctx.name))
    if worker not in plan.workers:
        raise SystemExit(f"args.worker: {worker!r} is not in args.workers {list(plan.workers)}")
    coll = Collective(
        plan,
        worker,
        ep,
        chunk_bytes=parse_size(ctx.args.get("chunk", 8192), "chunk"),
        window=_arg(ctx.args, "window", 16, int),
        lifetime_ms=int(_seconds(ctx.args, "lifetime", "500ms") * 1000),
        deadline=_seconds(ctx.args, "deadline", "30s"),
    )
    _export_metrics(ctx, coll)
    return coll


def _export_metrics(ctx: ServiceContext, member: Collective | Aggregator) -> None:
    """With a scenario's ``metrics:``, the member's counters in the process's own /metrics."""
    if ctx.metrics_registry is not None:
        from compute.collective.metrics import register_collective_metrics

        register_collective_metrics(member, ctx.metrics_registry)


EXACT = "bit_exact_or_named_error"  # the invariant every round of a worker is checked for
NO_END_AFTER = 10.0  # seconds past the deadline: the round is taken as never ending


async def worker(ctx: WorkloadContext) -> None:
    """``args.rounds`` (default 10) allreduces of ``args.size`` bytes (default 1MiB) of
    ``args.dtype`` (float32) with ``args.op`` (sum), one every ``args.every`` at most (default:
    back to back); each recorded with its latency, and failed if the result differs by one bit
    from the reference.

    Each round is also a check of the invariant ``bit_exact_or_named_error``: it held when the
    result is bit-exact or the round raised a CollectiveError (which names what failed); it is
    violated by a result that differs, any other exception, or no end ``NO_END_AFTER`` s past
    the deadline."""
    plan = job_plan(ctx)
    try:
        dtype = np.dtype(str(ctx.args.get("dtype", "float32")))
    except TypeError:
        raise SystemExit(f"args.dtype: {ctx.args.get('dtype')!r} is not a numpy dtype") from None
    if dtype.kind not in "iufc":
        raise SystemExit(f"args.dtype: {dtype} is not numeric; use e.g. float32 or int64")
    op = str(ctx.args.get("op", "sum"))
    if op not in OPS:
        raise SystemExit(f"args.op: {op!r} is not one of {', '.join(OPS)}")
    items = parse_size(ctx.args.get("size", "1MiB"), "size") // dtype.itemsize
    rounds = _arg(ctx.args, "rounds", 10, int)
    every = _seconds(ctx.args, "every", "0s")
    coll = _collective(ctx, plan, await ctx.endpoint())
    await coll.start()
    stop = asyncio.Event()
    reporter = asyncio.ensure_future(_report(ctx, coll.counters, stop))
    try:
        await coll.barrier()  # everyone is serving before the clock starts
        first = time.monotonic()
        for rnd in range(rounds):
            if ctx.remaining <= 0:
                break
            await asyncio.sleep(max(0.0, first + rnd * every - time.monotonic()))
            await _round(ctx, coll, plan, rnd, items, dtype, op)
        try:
            await coll.barrier()  # stay serving until every worker has its last result
        except CollectiveError as exc:
            ctx.log(f"last barrier: {exc}")
    finally:
        stop.set()
        await asyncio.gather(reporter, return_exceptions=True)
        ctx.log(f"worker {coll.worker}: {coll.stats()}")
        await coll.close()


async def _round(
    ctx: WorkloadContext,
    coll: Collective,
    plan: Plan,
    rnd: int,
    items: int,
    dtype: np.dtype[Any],
    op: str,
) -> None:
    """One allreduce, recorded and checked."""
    arrays = {w: seeded_array(w, rnd, items, dtype) for w in plan.workers}
    sent = time.time()
    try:
        async with asyncio.timeout(coll.deadline + NO_END_AFTER):
            got = await coll.allreduce(arrays[coll.worker], op)
    except CollectiveError as exc:
        ctx.record(False, sent=sent, error=str(exc)[:200])
        ctx.check(EXACT, True, "named error", f"round {rnd}: {exc}")
        ctx.log(f"round {rnd}: {exc}")
        return
    except TimeoutError:
        ctx.record(False, sent=sent, error="no end")
        ctx.check(EXACT, False, "no end", f"round {rnd}: past the deadline + {NO_END_AFTER:g} s")
        return
    except Exception as exc:
        ctx.record(False, sent=sent, error=f"{type(exc).__name__}: {exc}"[:200])
        ctx.check(EXACT, False, f"untyped error {type(exc).__name__}", f"round {rnd}: {exc}")
        ctx.log(f"round {rnd}: {type(exc).__name__}: {exc}")
        return
    exact = got.tobytes() == plan.reference(arrays, op).tobytes()
    ctx.record(
        exact,
        time.time() - sent,
        sent=sent,
        nbytes=got.nbytes,
        error=None if exact else "result differs from numpy's reduction",
    )
    ctx.check(EXACT, exact, "bit-exact" if exact else "differs", None if exact else f"round {rnd}")


def training_config(args: Mapping[str, Any]) -> Any:
    """``args.seed``, ``args.steps``, ``args.batch``, ``args.hidden``, ``args.learning_rate``."""
    from apps.demos import digits_mlp

    fields = {"seed": "seed", "steps": "steps", "batch": "batch_size", "hidden": "hidden"}
    values: dict[str, Any] = {}
    try:
        for key, field in fields.items():
            if key in args:
                values[field] = int(args[key])
        if "learning_rate" in args:
            values["learning_rate"] = float(args["learning_rate"])
        return digits_mlp.Config(**values)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"args: {exc} (seed, steps, batch, hidden are integers)") from None


async def trainer(ctx: WorkloadContext) -> None:
    """Train the digits MLP data-parallel (one allreduce of the gradient per step) and record
    one operation: ok if the final weights equal single-process training's within
    ``digits_mlp.WEIGHT_TOLERANCE``."""
    from apps.demos import digits_mlp

    plan = job_plan(ctx)
    config = training_config(ctx.args)
    coll = _collective(ctx, plan, await ctx.endpoint())
    await coll.start()
    try:
        await coll.barrier()
        sent = time.time()
        weights = await digits_mlp.train_worker(config, coll.rank, coll.size, coll.allreduce)
        took = time.time() - sent
        single = digits_mlp.train_single(config)
        tol = digits_mlp.WEIGHT_TOLERANCE
        match = bool(np.allclose(weights, single, rtol=tol.rtol, atol=tol.atol))
        accuracy = digits_mlp.accuracy(weights, config)
        ctx.metric("accuracy", accuracy)
        ctx.metric("max_weight_difference", digits_mlp.compare(weights, single))
        ctx.record(
            match,
            took,
            sent=sent,
            nbytes=weights.nbytes,
            error=None if match else "weights differ from single-process training",
        )
        ctx.log(f"{config.steps} steps in {took:.2f}s: accuracy {accuracy:.3f}, match {match}")
        await coll.barrier()
    except CollectiveError as exc:
        ctx.record(False, error=str(exc)[:200])
        ctx.log(str(exc))
    finally:
        await coll.close()
