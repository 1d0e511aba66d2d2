"""Two allreduce jobs at once on the same aggregator nodes and links: both exact, neither
starved.

The wall-clock bound (each job within 2.2x of its time alone) is measured by
``bench/allreduce_net.py --modes in-network,two-jobs``; a test does not assert timings on a
shared machine.  What a test can prove without a clock: the two jobs' rounds interleave, so
when either job finishes, the other has finished most of its rounds too (a job that waited
behind the other would have finished none).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from compute.collective import Aggregator, Collective, Plan
from tests.integration.collective.conftest import AGGREGATORS, LINKS, PLACES
from tests.integration.collective.net import Net

ROUNDS = 6
JOBS = ("/ar", "/ar2")


async def start_job(net: Net, job: str) -> tuple[Plan, list[Collective], list[Aggregator]]:
    plan = Plan.from_topology(job, LINKS, PLACES, AGGREGATORS)
    for w, node in PLACES.items():
        net.route(f"{job}/w/{w}", node)
    net.route(f"{job}/sum", plan.root)
    for node in AGGREGATORS:
        net.route(f"{job}/agg/{node}", node)
    aggs = []
    for node in AGGREGATORS:  # on the same nodes (and forwarders) as the other job's
        agg = Aggregator(plan, node, net.endpoint(node))
        await agg.start()
        aggs.append(agg)
    workers = []
    for w, node in PLACES.items():
        coll = Collective(plan, w, net.endpoint(node), chunk_bytes=8192, window=8)
        await coll.start()
        workers.append(coll)
    return plan, workers, aggs


def inputs(job: int, rnd: int) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng([job, rnd])
    return {w: rng.standard_normal(40_000).astype(np.float32) for w in PLACES}


async def test_two_jobs_on_the_same_aggregators_are_exact_and_interleave() -> None:
    net = await Net.start(LINKS)
    jobs: list[tuple[Plan, list[Collective], list[Aggregator]]] = []
    try:
        for name in JOBS:
            jobs.append(await start_job(net, name))
        finished: list[tuple[int, int]] = []  # (job, round) as each round completes

        async def run(j: int) -> None:
            plan, workers, _ = jobs[j]
            for rnd in range(ROUNDS):
                arrays = inputs(j, rnd)
                results = await asyncio.gather(
                    *(c.allreduce(arrays[c.worker], "sum") for c in workers)
                )
                expected = plan.reference(arrays, "sum").tobytes()
                assert all(r.tobytes() == expected for r in results), (JOBS[j], rnd)
                finished.append((j, rnd))

        await asyncio.wait_for(asyncio.gather(run(0), run(1)), 120)
        for j in (0, 1):
            last = finished.index((j, ROUNDS - 1))
            other_done = sum(1 for k, _ in finished[:last] if k != j)
            # within 2.2x of alone <=> the other job is at least 1/2.2 of the way through
            assert other_done >= ROUNDS / 2.2, finished
    finally:
        for _, workers, aggs in jobs:
            for c in workers:
                await c.close()
            for a in aggs:
                await a.close()
        await net.stop()
