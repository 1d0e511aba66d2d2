"""A child aggregator behind a slow link is waited for, not bypassed: its answers queue behind
each other, so one chunk may take longer than ``bypass_after`` while the child keeps answering
others.  Bypassing it would pull its workers' chunks over that same link (the spine of
bench/allreduce_net.py did so on a 25 Mbit/s uplink, and with no route to the workers hung).
A dead child is still bypassed (test_allreduce.py)."""

from __future__ import annotations

import asyncio

import numpy as np

from forwarder.face.shaper import ShaperConfig
from tests.integration.collective.conftest import PLACES, Job


async def test_a_child_aggregator_on_a_slow_link_is_waited_for(job: Job) -> None:
    # r <- m1 at 0.5 Mbit/s: the root pulls 16 chunks of 8 KiB at once, 2 s of the link
    for a, b in (("r", "m1"), ("m1", "r")):
        face = job.net.daemons[a].faces.get(job.net.faces[(a, b)])
        assert face is not None
        face.set_shaper(ShaperConfig(rate=0.5e6, queue_limit=8 << 20))
    await job.start(aggregator={"bypass_after": 1.0}, chunk_bytes=8192, window=16)
    rng = np.random.default_rng(3)
    arrays = {w: rng.standard_normal(50_000).astype(np.float32) for w in PLACES}  # 25 chunks
    results = await asyncio.wait_for(
        asyncio.gather(*(c.allreduce(arrays[c.worker], "sum") for c in job.workers)), 60
    )
    expected = job.plan.reference(arrays, "sum").tobytes()
    assert all(r.tobytes() == expected for r in results)
    root = job.aggregators["r"].counters
    assert root["chunks_bypassed"] == 0 and root["bypass_slow"] == 0
    assert root["slow_child_waited"] > 0  # the link was slow enough to matter
