"""The position an instance reports as durable to its producers (they drop every batch below
it) is never ahead of where a restart resumes.  It was computed from the readers' live
positions, a restart resumes from the ones saved in the checkpoint file: an instance killed
between a reader's report and its own next checkpoint came back needing batches its producer
had dropped, and asked for them for ever (the chaos soak's stall after node e was killed: key_by
resumed at input 6099, its generator kept only 6108 on)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from compute.stream.graph import parse_graph
from compute.stream.instance import Instance
from compute.stream.names import Ack, FlowNames
from compute.stream.outbox import Outbox


class _Rec:
    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future


class _Served:
    async def close(self) -> None:
        pass


class FakeEndpoint:
    """Just what an instance and an outbox call: Interests never answered, Data as bytes."""

    async def serve(self, prefix: bytes, handler: Any, *, register: bool = True) -> _Served:
        return _Served()

    def start(self, name: bytes, **_: Any) -> _Rec:
        return _Rec(asyncio.get_running_loop().create_future())

    def drop(self, rec: _Rec) -> None:
        rec.future.cancel()

    def make_data(self, name: bytes, content: bytes = b"", **_: Any) -> bytes:
        return bytes(name) + content


GRAPH = {
    "flow": "/d",
    "settings": {"checkpoint": "1s"},
    "operators": [
        {"name": "gen", "type": "generator", "count": 1000},
        {"name": "keyed", "type": "key_by", "input": "gen", "field": "k"},
        {"name": "out", "type": "stdout", "input": "keyed"},
    ],
}


def ack(outbox: Outbox, reader: str, consumed: int, durable: int) -> None:
    name = FlowNames.ack(outbox.stream, reader, consumed, durable)
    outbox._on_ack(Ack(reader, consumed, durable), lambda _wire: None, name)


async def test_a_restart_never_needs_batches_its_producer_was_told_to_drop(
    tmp_path: Path,
) -> None:
    graph = parse_graph(GRAPH)
    ep: Any = FakeEndpoint()
    gen = Outbox(ep, FlowNames("/d").stream("gen", 0), ["keyed.0"], buffer=64, counters=Counter())
    for _ in range(40):
        gen.put(b"batch")

    keyed = Instance(graph, "keyed", 0, ep, state_dir=tmp_path)
    await keyed.open()
    assert keyed.outbox is not None

    def steps(n: int) -> None:  # what run() does per step, without the operator
        for _ in range(n):
            keyed.outbox.put(b"records")  # type: ignore[union-attr]
            keyed.in_pos += 1

    def report() -> None:  # what _report() tells the producer
        ack(gen, "keyed.0", keyed.in_pos, keyed.durable)

    steps(10)
    keyed._checkpoint()  # entry 10; out.0 has nothing in a checkpoint yet
    report()
    ack(keyed.outbox, "out.0", 10, 10)
    steps(10)
    keyed._checkpoint()  # entry 20, saved with out.0 durable at 10: a restart resumes at 10
    report()
    ack(keyed.outbox, "out.0", 20, 20)  # out.0 checkpoints; keyed.0 does not, yet
    report()
    await keyed.close()  # killed: nothing more is saved

    again = Instance(graph, "keyed", 0, ep, state_dir=tmp_path)
    await again.open()
    try:
        assert again.counters["restored"] == 1
        assert gen.low <= again.in_pos, (
            f"keyed.0 resumed at input {again.in_pos}, but gen.0 was told it may drop every "
            f"batch below {gen.low}"
        )
        assert all(seq in gen._wires for seq in range(again.in_pos, gen.next_seq))
    finally:
        await again.close()
