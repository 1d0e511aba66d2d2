"""An 8-worker job on a two-level tree of in-process forwarders linked in memory:

r (root aggregator)
|- m1 (aggregator) - a (w0, w1), b (w2, w3)
'- m2 (aggregator) - c (w4, w5), d (w6, w7)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from compute.collective import Aggregator, Collective, Plan
from tests.integration.collective.net import Net

LINKS = [("r", "m1"), ("r", "m2"), ("m1", "a"), ("m1", "b"), ("m2", "c"), ("m2", "d")]
PLACES = {"w0": "a", "w1": "a", "w2": "b", "w3": "b", "w4": "c", "w5": "c", "w6": "d", "w7": "d"}
AGGREGATORS = ["r", "m1", "m2"]


@dataclass
class Job:
    net: Net
    plan: Plan
    aggregators: dict[str, Aggregator] = field(default_factory=dict)
    workers: list[Collective] = field(default_factory=list)

    async def start(self, *, aggregator: dict[str, Any] | None = None, **worker: Any) -> None:
        for node in AGGREGATORS:
            agg = Aggregator(self.plan, node, self.net.endpoint(node), **(aggregator or {}))
            await agg.start()
            self.aggregators[node] = agg
        for w, node in PLACES.items():
            coll = Collective(self.plan, w, self.net.endpoint(node), **worker)
            await coll.start()
            self.workers.append(coll)


async def make_job(job: str = "/ar") -> Job:
    net = await Net.start(LINKS)
    plan = Plan.from_topology(job, LINKS, PLACES, AGGREGATORS)
    for w, node in PLACES.items():
        net.route(f"{job}/w/{w}", node)
        net.route(f"{job}/ring/{w}", node)
    net.route(f"{job}/sum", plan.root)
    for node in AGGREGATORS:
        net.route(f"{job}/agg/{node}", node)
    return Job(net, plan)


@pytest.fixture
async def job() -> AsyncIterator[Job]:
    j = await make_job()
    try:
        yield j
    finally:
        await j.net.stop()
