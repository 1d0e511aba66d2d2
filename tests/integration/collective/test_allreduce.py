"""Allreduce through aggregators in the network: exact results, loss, failures, stragglers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest

from compute.collective import Aggregator, CollectiveError, ring_reference
from tests.chaos.harness import CpuLoad
from tests.integration.collective.conftest import PLACES, Job
from tests.waiting import wait_until

CASES = [
    (np.float32, (300, 257)),  # 77,100 items: 38 chunks, the last one short
    (np.float64, (5,)),
    (np.int64, (64, 64)),
    (np.int32, ()),  # a 0-d array
    (np.uint8, (10_000,)),  # wraps on overflow, exactly as numpy
    (np.float16, (3, 0)),  # an empty array
    (np.complex64, (100,)),
]


def arrays_for(dtype: Any, shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    out = {}
    for w in PLACES:
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            out[w] = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        elif np.issubdtype(dtype, np.complexfloating):
            out[w] = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
        else:
            out[w] = (rng.standard_normal(shape) * 1e3).astype(dtype)
    return out


async def run_round(job: Job, arrays: dict[str, Any], op: str, timeout: float = 60) -> list[Any]:
    calls = (c.allreduce(arrays[c.worker], op) for c in job.workers)
    return list(await asyncio.wait_for(asyncio.gather(*calls), timeout))


async def every_case_gives_the_same_bits(job: Job, ops: tuple[str, ...]) -> None:
    """Each of CASES reduced with each of ``ops`` (max and min skip complex dtypes): every
    worker gets numpy's reduction in the plan's order, bit for bit."""
    for i, (dtype, shape) in enumerate(CASES):
        arrays = arrays_for(dtype, shape, seed=i)
        for op in ops:
            if op in ("max", "min") and np.issubdtype(dtype, np.complexfloating):
                continue
            results = await run_round(job, arrays, op)
            expected = job.plan.reference(arrays, op)
            for got in results:
                assert got.shape == expected.shape and got.dtype == expected.dtype
                assert got.tobytes() == expected.tobytes(), (dtype, shape, op)


async def test_every_worker_receives_the_same_bits_as_numpy_in_the_same_order(job: Job) -> None:
    await job.start()
    await every_case_gives_the_same_bits(job, ("sum", "mean", "max", "min"))
    # the sums came down the tree: one Data per chunk left the root, not one per worker
    root = job.aggregators["r"].counters
    assert root["chunks_resent"] == 0
    assert root["bytes_sent"] < sum(c.counters["bytes_received"] for c in job.workers) / 4


async def test_five_percent_loss_still_exact_and_recovered_from_caches(job: Job) -> None:
    await job.start(aggregator={"lifetime_ms": 300}, lifetime_ms=300, deadline=60)
    job.net.lossy("r", "m1", 0.05, seed=7)
    job.net.lossy("m2", "c", 0.05, seed=8)
    job.net.lossy("m1", "a", 0.05, seed=9)
    for rnd in range(3):
        arrays = arrays_for(np.float32, (200, 1000), seed=100 + rnd)
        results = await run_round(job, arrays, "sum")
        expected = job.plan.reference(arrays, "sum")
        assert all(r.tobytes() == expected.tobytes() for r in results)
    retransmitted = sum(c.counters["interests_retransmitted"] for c in job.workers)
    assert retransmitted > 0  # the loss was real
    cache_bytes = job.net.total("fw.cs_hit_bytes")
    resent = sum(a.counters["bytes_resent"] for a in job.aggregators.values())
    resent += sum(c.counters["bytes_resent"] for c in job.workers)
    assert cache_bytes > 0
    assert cache_bytes > resent  # most losses came back from a cache, not from the source


@pytest.mark.fault
async def test_an_aggregator_killed_mid_job_is_bypassed(job: Job, cpu: CpuLoad) -> None:
    await job.start(aggregator={"bypass_after": 1.0})
    arrays = [arrays_for(np.float32, (400, 1000), seed=200 + r) for r in range(3)]
    first = await run_round(job, arrays[0], "sum", cpu.budget(60))
    assert first[0].tobytes() == job.plan.reference(arrays[0], "sum").tobytes()

    m1 = job.aggregators["m1"]
    calls = asyncio.gather(*(c.allreduce(arrays[1][c.worker], "sum") for c in job.workers))
    # the round is under way: m1 is computing chunks of it
    await wait_until(lambda: bool(m1._tasks), cpu.budget(10))
    del job.aggregators["m1"]
    for task in list(m1._tasks):
        task.cancel()
    m1.ep.close()  # the process dies: its face and routes go
    second = await asyncio.wait_for(calls, cpu.budget(60))
    third = await run_round(job, arrays[2], "sum", cpu.budget(60))
    for got, arr in ((second, arrays[1]), (third, arrays[2])):
        expected = job.plan.reference(arr, "sum")
        assert all(r.tobytes() == expected.tobytes() for r in got)
    assert job.aggregators["r"].gone == {"m1"}
    assert job.aggregators["r"].counters["chunks_bypassed"] > 0


@pytest.mark.fault
async def test_a_dead_worker_is_named_at_the_others_within_the_deadline(
    job: Job, cpu: CpuLoad
) -> None:
    await job.start(aggregator={"member_timeout": 1.5}, deadline=10)
    dead = job.workers.pop()  # w7 never calls
    arrays = arrays_for(np.float32, (1000,), seed=5)
    started = time.monotonic()
    calls = (c.allreduce(arrays[c.worker], "sum") for c in job.workers)
    gathered = asyncio.gather(*calls, return_exceptions=True)
    results = await asyncio.wait_for(gathered, cpu.budget(30))
    assert time.monotonic() - started < 10  # the job's deadline, a promise: not scaled
    assert all(isinstance(r, CollectiveError) for r in results)
    assert all(f"worker {dead.worker} did not contribute" in str(r) for r in results)


async def test_a_straggler_within_the_deadline_is_waited_for(job: Job) -> None:
    await job.start(lifetime_ms=400)
    arrays = arrays_for(np.int64, (5000,), seed=6)

    async def late(coll: Any) -> Any:
        await asyncio.sleep(1.5)  # the thing tested: late by several Interest lifetimes
        return await coll.allreduce(arrays[coll.worker], "sum")

    calls = [c.allreduce(arrays[c.worker], "sum") for c in job.workers[:-1]]
    results = await asyncio.wait_for(asyncio.gather(*calls, late(job.workers[-1])), 30)
    expected = sum(arrays.values())
    assert all(np.array_equal(r, expected) for r in results)


async def test_a_result_written_into_out_or_in_place_has_the_same_bits(job: Job) -> None:
    await job.start(chunk_bytes=4096)
    arrays = arrays_for(np.float32, (300, 257), seed=16)
    expected = {op: job.plan.reference(arrays, op) for op in ("sum", "mean")}
    for op in ("sum", "mean"):
        outs = {w: np.full_like(a, np.nan) for w, a in arrays.items()}
        calls = (c.allreduce(arrays[c.worker], op, out=outs[c.worker]) for c in job.workers)
        results = await asyncio.wait_for(asyncio.gather(*calls), 60)
        for c, got in zip(job.workers, results, strict=True):
            assert got is outs[c.worker] and got.tobytes() == expected[op].tobytes()
    own = {w: a.copy() for w, a in arrays.items()}  # in place: the result over the input
    calls = (c.allreduce(own[c.worker], "sum", out=own[c.worker]) for c in job.workers)
    await asyncio.wait_for(asyncio.gather(*calls), 60)
    assert all(a.tobytes() == expected["sum"].tobytes() for a in own.values())
    coll = job.workers[0]
    for bad, field in (
        (np.empty((300, 256), np.float32), "shape"),
        (np.empty((300, 257), np.float64), "dtype"),
        (np.empty((257, 300), np.float32).T, "C-contiguous"),
    ):
        with pytest.raises(CollectiveError, match=f"out: .*{field}"):
            await coll.allreduce(arrays["w0"], "sum", out=bad)
    with pytest.raises(CollectiveError, match="out: the mean of int32"):
        await coll.allreduce(np.zeros(3, np.int32), "mean", out=np.zeros(3, np.int32))


async def test_workers_that_disagree_get_a_clear_error(job: Job) -> None:
    await job.start(deadline=10)
    arrays = arrays_for(np.float32, (100,), seed=1)
    arrays["w3"] = arrays["w3"].astype(np.float64)
    results = await asyncio.gather(
        *(c.allreduce(arrays[c.worker], "sum") for c in job.workers), return_exceptions=True
    )
    assert all(isinstance(r, CollectiveError) and "disagrees" in str(r) for r in results)


async def test_ring_mode_gives_every_worker_the_same_bits(job: Job) -> None:
    await job.start(mode="ring")
    arrays = arrays_for(np.float32, (123, 457), seed=11)
    results = await run_round(job, arrays, "sum")
    expected = ring_reference([arrays[w] for w in PLACES], "sum")
    assert all(r.tobytes() == expected.tobytes() for r in results)
    ints = arrays_for(np.int64, (999,), seed=12)
    assert all(np.array_equal(r, sum(ints.values())) for r in await run_round(job, ints, "sum"))


async def test_parameter_server_mode_is_a_flat_plan(job: Job) -> None:
    from compute.collective import Collective, Plan

    plan = Plan.flat("/ps", list(PLACES), root="ps")
    job.net.route("/ps/sum", "r")
    server = Aggregator(plan, "ps", job.net.endpoint("r"))
    await server.start()
    workers = []
    for w, node in PLACES.items():
        job.net.route(f"/ps/w/{w}", node)
        coll = Collective(plan, w, job.net.endpoint(node))
        await coll.start()
        workers.append(coll)
    arrays = arrays_for(np.float64, (2000,), seed=13)
    results = await asyncio.gather(*(c.allreduce(arrays[c.worker], "sum") for c in workers))
    expected = plan.reference(arrays, "sum")
    assert all(r.tobytes() == expected.tobytes() for r in results)
    assert server.counters["chunks_aggregated"] >= 2


async def test_broadcast_reduce_allgather_barrier(job: Job) -> None:
    await job.start(chunk_bytes=1024)
    arrays = arrays_for(np.int32, (50, 7), seed=14)
    source = arrays["w5"]
    got = await asyncio.gather(
        *(c.broadcast(source if c.worker == "w5" else None, root="w5") for c in job.workers)
    )
    assert all(np.array_equal(g, source) for g in got)
    reduced = await asyncio.gather(*(c.reduce(arrays[c.worker], "max", "w2") for c in job.workers))
    assert [r is None for r in reduced] == [w != "w2" for w in PLACES]
    assert np.array_equal(reduced[2], np.max(np.stack(list(arrays.values())), axis=0))
    gathered = await asyncio.gather(*(c.allgather(arrays[c.worker]) for c in job.workers))
    for lists in gathered:
        assert [a.tolist() for a in lists] == [arrays[w].tolist() for w in PLACES]
    await asyncio.wait_for(asyncio.gather(*(c.barrier() for c in job.workers)), 30)
    with pytest.raises(CollectiveError, match="root 'nobody'"):
        await job.workers[0].broadcast(source, root="nobody")


async def test_the_aggregator_bounds_the_chunks_it_pulls_at_once(job: Job) -> None:
    await job.start(aggregator={"max_in_flight": 2}, window=16, chunk_bytes=4096)
    arrays = arrays_for(np.float64, (40_000,), seed=15)  # 79 chunks, 16 asked at a time
    active = {"now": 0, "peak": 0}
    root = job.aggregators["r"]
    pull = root._parts

    async def watched(node: str, key: Any, until: float) -> Any:
        active["now"] += node == "r"
        active["peak"] = max(active["peak"], active["now"])
        try:
            return await pull(node, key, until)
        finally:
            active["now"] -= node == "r"

    root._parts = watched  # type: ignore[method-assign]
    results = await run_round(job, arrays, "sum")
    expected = job.plan.reference(arrays, "sum")
    assert all(r.tobytes() == expected.tobytes() for r in results)
    assert active["peak"] == 2
    assert root.counters["chunks_queued"] > 0
