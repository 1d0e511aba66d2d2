"""In-memory transport: deferred batched delivery, bounded queue, close seen by both ends."""

from __future__ import annotations

import asyncio
from collections import Counter

from forwarder.face.face import Face
from forwarder.face.memory import memory_pair
from icn.wire.encode import make_interest
from icn.wire.name import from_uri
from tests.unit.face.helpers import ManualSoon, RecordingSink

INTEREST = make_interest(from_uri("/m"), nonce=b"abcd")


def test_delivery_is_deferred_and_batched() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    a, b = memory_pair(counters, call_soon=soon)
    got: list[bytes] = []
    b.bind(got.append, lambda: None)
    for _ in range(5):
        a.send(INTEREST)
    assert got == []
    assert len(soon.callbacks) == 1  # one scheduled drain for the whole burst
    soon.run()
    assert got == [INTEREST] * 5
    assert a.out_bytes == b.in_bytes == 5 * len(INTEREST)


def test_queue_is_bounded() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    a, b = memory_pair(counters, call_soon=soon, queue_limit=2 * len(INTEREST))
    got: list[bytes] = []
    b.bind(got.append, lambda: None)
    for _ in range(3):
        a.send(INTEREST)
    assert counters["face.drop_send_queue_full"] == 1
    soon.run()
    assert len(got) == 2
    a.send(INTEREST)  # the queue drained, there is room again
    soon.run()
    assert len(got) == 3


def test_close_reaches_both_ends_once() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    ta, tb = memory_pair(counters, call_soon=soon)
    a, b = Face(ta), Face(tb)
    closed: list[Face] = []
    a.on_closed = closed.append
    b.on_closed = closed.append
    a.send_interest(INTEREST)
    a.close()
    a.close()
    assert sorted(closed, key=id) == sorted([a, b], key=id)
    assert a.closed and b.closed
    soon.run()  # the packet queued before the close is not delivered to a closed face
    assert b.stats.n_in_interests == 0
    a.send_interest(INTEREST)
    assert counters["face.drop_closed"] == 1


def test_uris_and_scope() -> None:
    a, b = memory_pair(Counter(), name="app1")
    assert a.local_uri == "memory://app1-a" and a.remote_uri == "memory://app1-b"
    assert a.is_local and b.is_local and a.mtu is None


async def test_works_on_the_running_loop() -> None:
    counters: Counter[str] = Counter()
    ta, tb = memory_pair(counters)
    a, b = Face(ta), Face(tb)
    sink = RecordingSink()
    b.sink = sink
    a.send_interest(INTEREST)
    await asyncio.sleep(0)
    assert sink.interests == [(0, INTEREST, None)]
    a.close()
