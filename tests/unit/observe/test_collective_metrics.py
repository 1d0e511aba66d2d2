"""Collective members' /metrics: an 8-worker job on in-process forwarders, scraped after two
allreduce rounds over a lossy link; each family once, its values the members' counters."""

from __future__ import annotations

import asyncio
import re

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest

from compute.collective import Aggregator, Collective
from compute.collective.metrics import register_collective_metrics
from tests.integration.collective.conftest import make_job


def value(text: str, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (in any order) in the exposition ``text``."""
    for m in re.finditer(rf"^{name}\{{(.*)\}} (\S+)$", text, re.M):
        if dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))) == labels:
            return float(m.group(2))
    raise AssertionError(f"{name}{labels} not in:\n{text[:3000]}")


async def test_rounds_chunks_bytes_and_retries_of_every_member() -> None:
    job = await make_job("/obs")
    try:
        await job.start(aggregator={"lifetime_ms": 300}, lifetime_ms=300, deadline=30)
        registry = CollectorRegistry()
        members: list[Collective | Aggregator] = [*job.workers, *job.aggregators.values()]
        for member in members:
            register_collective_metrics(member, registry)
        # loss on the link to workers w0 and w1: some chunk Interests are asked again
        job.net.lossy("m1", "a", 0.1, seed=3)
        rng = np.random.default_rng(1)
        for _ in range(2):
            arrays = {c.worker: rng.standard_normal(40_000).astype(np.float32) for c in job.workers}
            calls = (c.allreduce(arrays[c.worker]) for c in job.workers)
            await asyncio.wait_for(asyncio.gather(*calls), 30)
        text = generate_latest(registry).decode()
    finally:
        await job.net.stop()

    for family in ("rounds", "chunks", "bytes", "retries", "recoveries", "events"):
        # one collector per registry: each family is typed once, whatever the members
        assert text.count(f"# TYPE icn_collective_{family}_total counter") == 1, family
    w0 = {"job": "/obs", "member": "w0", "role": "worker"}
    root = {"job": "/obs", "member": "r", "role": "aggregator"}
    assert value(text, "icn_collective_rounds_total", **w0) == 2
    assert value(text, "icn_collective_rounds_total", **root) == 2
    w0_counters = job.workers[0].counters
    r_counters = job.aggregators["r"].counters
    samples = [
        ("chunks", {**w0, "event": "published"}, w0_counters["chunks_published"]),
        ("chunks", {**root, "event": "aggregated"}, r_counters["chunks_aggregated"]),
        ("bytes", {**root, "direction": "out"}, r_counters["bytes_sent"]),
        ("bytes", {**w0, "direction": "in"}, w0_counters["bytes_received"]),
        ("retries", w0, w0_counters["interests_retransmitted"]),
        ("recoveries", {**root, "kind": "resent"}, r_counters["chunks_resent"]),
        ("recovered_bytes", w0, w0_counters["bytes_after_retx"]),
        ("events", {**w0, "event": "chunks_published"}, w0_counters["chunks_published"]),
    ]
    for family, labels, expected in samples:
        assert value(text, f"icn_collective_{family}_total", **labels) == expected, family
    assert w0_counters["chunks_published"] > 0 and r_counters["chunks_aggregated"] > 0
    retried = sum(
        value(text, "icn_collective_retries_total", **{**w0, "member": w}) for w in ("w0", "w1")
    )
    assert retried > 0  # the loss was real and is seen in the scrape
    assert text.count("icn_collective_rounds_total{") == len(members)
