"""Flows across in-process forwarders: every record once and in order per partition under 5%
loss, window results equal to a reference computed straight from the input, and one stream
shared by two readers through the network (the producer sends each batch once)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from apps.inproc import attach_endpoint
from compute.stream.flow import FlowRun
from compute.stream.graph import parse_graph
from icn.dataplane.endpoint import Endpoint
from tests.integration.collective.net import Net
from tests.integration.stream.funcs import expected, window_means

EPS = 500.0  # events per second of event time: 3000 records span 6 s, six 1 s windows


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def run_placed(net: Net, graph: Any, timeout: float = 60.0) -> dict[str, FlowRun]:
    """One FlowRun per node, each instance on its own endpoint of its node's forwarder."""
    runs: dict[str, FlowRun] = {}
    for node in {op.node for op in graph.ops.values()}:

        async def connect(node: str = node) -> Endpoint:
            return attach_endpoint(net.daemons[node])

        runs[node] = FlowRun(graph, connect, graph.instances(node))
    try:
        for run in runs.values():
            await run.start()
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(r.wait() for r in runs.values() if r.sinks))
    finally:
        for run in runs.values():
            await run.stop()
    return runs


async def test_five_percent_loss_every_record_once_in_order_and_windows_exact(
    workdir: Path,
) -> None:
    count = 3000
    graph = parse_graph(
        {
            "flow": "/lossy",
            "settings": {"lifetime": "1s"},
            "operators": [
                {
                    "name": "gen",
                    "type": "generator",
                    "count": count,
                    "node": "p",
                    "partitions": 2,
                    "batch": 40,
                    "events_per_second": EPS,
                    "fn": "tests.integration.stream.funcs:reading",
                },
                {
                    "name": "doubled",
                    "type": "map",
                    "input": "gen",
                    "node": "m",
                    "fn": "tests.integration.stream.funcs:double",
                },
                {
                    "name": "keyed",
                    "type": "key_by",
                    "input": "doubled",
                    "node": "m",
                    "field": "sensor",
                    "partitions": 2,
                },
                {
                    "name": "means",
                    "type": "window",
                    "input": "keyed",
                    "node": "c",
                    "tumbling": "1s",
                    "aggregate": "mean",
                    "field": "value",
                },
                {
                    "name": "raw",
                    "type": "file_sink",
                    "input": "doubled",
                    "node": "c",
                    "path": str(workdir / "raw-{partition}.jsonl"),
                },
                {
                    "name": "out",
                    "type": "file_sink",
                    "input": "means",
                    "node": "c",
                    "path": str(workdir / "means-{partition}.jsonl"),
                },
            ],
        }
    )
    net = await Net.start([("p", "m"), ("m", "c")])
    try:
        net.route("/lossy/gen", "p")
        net.route("/lossy/doubled", "m")
        net.route("/lossy/keyed", "m")
        net.route("/lossy/means", "c")
        net.lossy("p", "m", 0.05, seed=3)
        net.lossy("m", "c", 0.05, seed=5)
        runs = await run_placed(net, graph)
        lost = net.total("shaper.loss")
    finally:
        await net.stop()

    want = expected(count, EPS)
    for p in range(2):
        got = [(r["t"], r["key"], r["value"]) for r in read_jsonl(workdir / f"raw-{p}.jsonl")]
        # partition p of the generator made records p, p + 2, p + 4, ... in this order
        # (unkeyed: no key_field on the generator)
        assert got == [(t, None, v) for t, _, v in want[p::2]]
    means = [r["value"] for p in range(2) for r in read_jsonl(workdir / f"means-{p}.jsonl")]
    assert {(w["key"], w["start"]): w["value"] for w in means} == window_means(count, EPS, 1000)
    assert len(means) == len(window_means(count, EPS, 1000))  # each window once
    retransmitted = sum(r.totals()["interests_retransmitted"] for r in runs.values())
    assert lost > 20 and retransmitted > 0, (lost, retransmitted)


async def test_two_readers_share_one_stream_through_the_network(workdir: Path) -> None:
    count = 2000
    graph = parse_graph(
        {
            "flow": "/shared",
            "operators": [
                {
                    "name": "gen",
                    "type": "generator",
                    "count": count,
                    "node": "p",
                    "batch": 20,
                    "fn": "tests.integration.stream.funcs:reading",
                },
                {
                    "name": "a",
                    "type": "file_sink",
                    "input": "gen",
                    "node": "c1",
                    "path": str(workdir / "a.jsonl"),
                },
                {
                    "name": "b",
                    "type": "file_sink",
                    "input": "gen",
                    "node": "c2",
                    "path": str(workdir / "b.jsonl"),
                },
            ],
        }
    )
    #   p --- m --- c1      the readers' paths meet at m: p sends each batch to m once,
    #          \--- c2      m's PIT aggregates the two readers' Interests or its CS answers
    net = await Net.start([("p", "m"), ("m", "c1"), ("m", "c2")])
    try:
        net.route("/shared/gen", "p")
        runs = await run_placed(net, graph)
        face = net.daemons["p"].faces.get(net.faces[("p", "m")])
        assert face is not None
        data_to_m = face.link.stats.n_out_data
        cs_hits = net.daemons["m"].counters.get("fw.cs_hit", 0)
        aggregated = net.daemons["m"].counters.get("fw.aggregated", 0)
    finally:
        await net.stop()
    for name in ("a", "b"):
        got = [r["value"]["i"] for r in read_jsonl(workdir / f"{name}.jsonl")]
        assert got == list(range(count))
    producer = runs["p"].instances[0].counters
    batches = producer["batches"]
    assert batches == count // 20 + 0  # the last batch of 20 records ends the stream
    assert producer["batches_sent"] == batches
    assert producer["batches_resent"] == 0
    # every Data p sent toward m: each batch once, plus the answers to progress reports
    # (reports ask MustBeFresh, so a report repeated while the first waits at p's PIT is
    # answered twice by the producer and the second answer finds no PIT entry at p)
    assert batches < data_to_m <= batches + producer["reports_answered"]
    assert cs_hits + aggregated >= batches  # the second reader never reached p


async def test_an_undecodable_batch_is_dropped_counted_and_asked_again() -> None:
    from collections import Counter

    from compute.stream.batch import encode_batches
    from compute.stream.inlet import Inlet
    from compute.stream.names import FlowNames

    net = await Net.start([("p", "c")])
    try:
        net.route("/bad", "p")
        producer, reader = net.endpoint("p"), net.endpoint("c")
        stream = FlowNames("/bad").stream("op", 0)
        good = encode_batches([[1, None, "ok"]], 5, True, limit=8000, previous_watermark=0)[0]
        asked = Counter[int]()

        def answer(iv: Any, reply: Any) -> None:
            asked[0] += 1  # garbage first: content stores keep it, MustBeFresh passes them
            body = b"\xc1 not msgpack" if asked[0] == 1 else good
            reply(producer.make_data(iv.name, body, freshness=0))

        await producer.serve(stream, answer)
        counters: Counter[str] = Counter()
        inlet = Inlet(reader, stream, "r.0", counters=counters, max_window=1)
        inlet.start()
        try:
            async with asyncio.timeout(10):
                batch = await inlet.get()
        finally:
            await inlet.close()
    finally:
        await net.stop()
    assert batch.records == [[1, None, "ok"]] and batch.end
    assert counters["drop_bad_batch"] == 1 and asked[0] == 2
