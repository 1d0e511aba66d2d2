"""Three forwarder processes in a line over UDP with static routes (issue 2, "Done when")."""

from __future__ import annotations

from pathlib import Path

from apps.loadgen import Consumer, object_names
from apps.topology import start_line

COUNT = 1000


async def fetch(entry: tuple[str, int], names: list[bytes], rto: float = 0.3) -> object:
    c = Consumer(entry, window=32, rto=rto, max_retries=30)
    try:
        return await c.fetch(names, timeout=120)
    finally:
        c.close()


async def test_fetch_through_three_forwarders_then_from_first_hop_cache(workdir: Path) -> None:
    topo = start_line(workdir, 3, "/line")
    try:
        names = object_names("/line/obj", COUNT)
        first = await fetch(topo.entry, names)
        assert first.received == COUNT, first.missing
        before = [f.counters() for f in topo.forwarders]
        assert before[2]["fw.out_interest"] >= COUNT  # every object came from the producer
        second = await fetch(topo.entry, names)
        assert second.received == COUNT, second.missing
        after = [f.counters() for f in topo.forwarders]
    finally:
        topo.stop()
    hits = after[0].get("cs.hit", 0) - before[0].get("cs.hit", 0)
    assert hits >= COUNT - second.retransmissions
    assert hits >= COUNT * 0.99
    # the second pass never went past the first hop: the first forwarder sent nothing on.
    # (Not the next hops' counts of Interests in: a retransmission of the first pass that the
    # first hop sent on before its Data came back may reach them after they were read.  The
    # first hop's own count is exact: anything of the first pass it handled after the
    # consumer had every object was answered from its store.)
    assert after[0]["fw.out_interest"] == before[0]["fw.out_interest"]


async def test_every_object_arrives_with_ten_percent_loss_on_one_link(workdir: Path) -> None:
    topo = start_line(workdir, 3, "/lossy", shaped_link=1, shaper={"loss": 0.1, "seed": 7})
    try:
        result = await fetch(topo.entry, object_names("/lossy/obj", COUNT))
        counters = [f.counters() for f in topo.forwarders]
    finally:
        topo.stop()
    assert result.received == COUNT, result.missing
    assert result.failed == 0
    assert result.retransmissions > 0
    # both directions of the fwd1 <-> fwd2 link dropped packets, and nothing else did
    assert counters[1].get("shaper.loss", 0) > 0
    assert counters[2].get("shaper.loss", 0) > 0
    assert counters[0].get("shaper.loss", 0) == 0
