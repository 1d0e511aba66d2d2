"""fetch_segments over the fetcher, against an in-memory producer: once the first segment says
where the object ends, every other segment is asked for at once (within the window).  On a
virtual clock (tests/virtual_time.py): a 100 ms lifetime ends when the fetcher says, not when a
loaded CPU gets to the answer."""

from __future__ import annotations

import asyncio

from icn.dataplane.segments import fetch_segments, split_segment
from icn.wire.encode import make_data
from icn.wire.name import from_uri, segment
from icn.wire.packet import InterestView
from tests.unit.dataplane.memory_producer import Answer, endpoint
from tests.virtual_time import virtual_time

PREFIX = from_uri("/obj")
SEGMENTS = [bytes([i]) * 100 for i in range(10)]


def serve(last_says_only: bool = False) -> Answer:
    def answer(iv: InterestView) -> bytes | None:
        _, seg = split_segment(iv.name, iv.name_ends)
        if iv.can_be_prefix and seg is None:
            seg = 0
        if seg is None or seg >= len(SEGMENTS):
            return None
        final: bytes | None = segment(len(SEGMENTS) - 1)
        if last_says_only and seg != len(SEGMENTS) - 1:
            final = None
        return make_data(PREFIX + segment(seg), SEGMENTS[seg], final_block_id=final)

    return answer


@virtual_time
async def test_all_remaining_segments_go_out_at_once() -> None:
    ep, producer = endpoint(serve())
    task = asyncio.ensure_future(fetch_segments(ep, PREFIX, window=16, timeout=5))
    while not producer.seen:
        await asyncio.sleep(0.001)
    producer.hold = True  # after the first: hold the rest to see how many were asked at once
    while len(producer.seen) < 10 and not task.done():
        await asyncio.sleep(0.001)
    asked = [split_segment(iv.name, iv.name_ends)[1] for iv in producer.seen[1:]]
    # all of them, before any answer
    assert sorted(-1 if a is None else a for a in asked) == list(range(1, 10))
    producer.hold = False
    producer.release()
    assert await task == b"".join(SEGMENTS)
    assert ep.pending == 0


@virtual_time
async def test_without_a_final_block_id_segments_are_asked_ahead_until_one_ends_it() -> None:
    ep, _ = endpoint(serve(last_says_only=True))
    got = await fetch_segments(ep, PREFIX, window=4, lifetime_ms=100, retries=0, timeout=5)
    assert got == b"".join(SEGMENTS) and ep.pending == 0
