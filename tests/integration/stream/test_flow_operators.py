"""Operators end to end on one in-process forwarder: a file source, a keyed window join
against a reference computed from the input, and push-back from a reader that stops."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apps.inproc import attach_endpoint
from compute.stream.flow import FlowRun
from compute.stream.graph import parse_graph
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint
from tests.waiting import wait_until


async def run_graph(
    spec: dict[str, Any],
    which: Any = None,
    wait: float = 30,
    until: Callable[[FlowRun], bool] | None = None,
) -> FlowRun:
    """Run ``spec`` until its sinks end (within ``wait`` s) or, given ``until``, until that
    holds of the run (within 10 s)."""
    daemon = ForwarderDaemon(config_from_dict({"listen": {}}))
    await daemon.start()

    async def connect() -> Endpoint:
        return attach_endpoint(daemon)

    run = FlowRun(parse_graph(spec), connect, which)
    try:
        await run.start()
        if until is not None:
            await wait_until(lambda: until(run), 10)
        else:
            assert await run.wait(timeout=wait)
    finally:
        await run.stop()
        await daemon.stop()
    return run


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


async def test_file_source_to_window_join(workdir: Path) -> None:
    # orders and payments by customer; a join pairs them within each 1 s window
    orders = [{"t": i * 100, "customer": f"c{i % 4}", "order": i} for i in range(60)]
    payments = [{"t": i * 150, "customer": f"c{i % 3}", "paid": i} for i in range(40)]
    (workdir / "orders.jsonl").write_text("".join(json.dumps(o) + "\n" for o in orders))
    (workdir / "payments.csv").write_text(
        "t,customer,paid\n" + "".join(f"{p['t']},{p['customer']},{p['paid']}\n" for p in payments)
    )
    with (workdir / "orders.jsonl").open("a") as f:
        f.write("not json\n")  # skipped and counted
    src = {"time_field": "t", "key_field": "customer", "batch": 7}
    spec = {
        "flow": "/join",
        "operators": [
            {"name": "orders", "type": "file_source", "path": str(workdir / "orders.jsonl"), **src},
            {
                "name": "payments",
                "type": "file_source",
                "format": "csv",
                "path": str(workdir / "payments.csv"),
                **src,
            },
            {
                "name": "pairs",
                "type": "join",
                "left": "orders",
                "right": "payments",
                "tumbling": "1s",
            },
            {"name": "out", "type": "file_sink", "input": "pairs", "path": str(workdir / "o")},
        ],
    }
    run = await run_graph(spec)
    got = [(r["value"]["left"]["order"], r["value"]["right"]["paid"]) for r in lines(workdir / "o")]
    want = [
        (o["order"], p["paid"])
        for w in range(6)
        for c in sorted({o["customer"] for o in orders})
        for o in orders
        if o["customer"] == c and o["t"] // 1000 == w
        for p in payments
        if p["customer"] == c and p["t"] // 1000 == w
    ]
    assert sorted(got) == sorted(want) and len(got) == len(want) > 0
    assert run.totals()["bad_lines"] == 1


async def test_a_reader_that_stops_pushes_back_to_the_source() -> None:
    spec = {
        "flow": "/slow",
        # push-back by batches only: with the default lead a slow machine stops gen by time
        # (its oldest unread batch 50 ms old) before it has made its 4 + 4
        "settings": {"buffer": 4, "lead": "1h"},
        "operators": [
            {"name": "gen", "type": "generator", "batch": 10},  # endless
            {"name": "m", "type": "map", "input": "gen", "fn": "apps.demos.stream_demo:scale"},
            {"name": "out", "type": "stdout", "input": "m"},
        ],
    }

    # the sink never starts: m may run `buffer` batches ahead of it, gen as many ahead of m
    def stuck(run: FlowRun) -> bool:  # both stages full and pushed back
        gen, m = (inst.counters for inst in run.instances)
        full = m["batches"] >= 4 and gen["batches"] >= 4 + 4
        return full and gen["pushed_back"] >= 1 and m["pushed_back"] >= 1

    run = await run_graph(spec, which=[("gen", 0), ("m", 0)], until=stuck)
    gen, m = (inst.counters for inst in run.instances)
    assert m["batches"] == 4
    assert gen["batches"] == 4 + 4
    assert gen["pushed_back"] >= 1 and m["pushed_back"] >= 1
