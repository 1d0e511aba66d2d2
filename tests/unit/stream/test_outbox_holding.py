"""The stream outbox's answers to batch Interests on a hand-driven clock, no loop and no
network: a batch asked for before it exists is held and sent once per reply path when put;
too far ahead, gone, expired or too many are dropped and counted."""

from __future__ import annotations

from collections import Counter
from typing import Any

from compute.stream.names import FlowNames
from compute.stream.outbox import HOLD_AHEAD, Outbox
from icn.wire.encode import make_interest
from icn.wire.packet import InterestView, parse_interest

STREAM = FlowNames("/f").stream("gen", 0)


class FakeEndpoint:
    def make_data(self, name: bytes, content: bytes = b"", **_: Any) -> bytes:
        return b"D" + bytes(name) + b"|" + content


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


class Path:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def __call__(self, wire: bytes) -> None:
        self.sent.append(wire)


def interest(seq: int, lifetime: int = 1000) -> InterestView:
    return parse_interest(make_interest(FlowNames.batch(STREAM, seq), lifetime=lifetime))


def outbox(clock: Clock, max_waiting: int = 16) -> Outbox:
    ep: Any = FakeEndpoint()
    return Outbox(
        ep, STREAM, ["r.0"], buffer=8, counters=Counter(), max_waiting=max_waiting, clock=clock
    )


def test_a_batch_asked_for_early_is_sent_once_per_reply_path_when_put() -> None:
    clock = Clock()
    box = outbox(clock)
    face, other = Path(), Path()
    box.handle(interest(0), face)
    box.handle(interest(1), face)
    clock.now += 0.4
    box.handle(interest(0), face)  # a retransmission on the path it repeats
    box.handle(interest(0), other)
    assert len(box.waiting) == 3 and box.waiting.duplicates == 1
    assert box.put(b"b0") == 0
    assert len(face.sent) == 1 and face.sent == other.sent
    assert box.counters["batches_sent"] == 1 and box.counters["batches_resent"] == 1
    box.put(b"b1")
    assert len(face.sent) == 2 and face.sent[1].endswith(b"|b1")
    assert len(box.waiting) == 0


def test_an_interest_that_expired_while_held_is_not_answered() -> None:
    clock = Clock()
    box = outbox(clock)
    face = Path()
    box.handle(interest(0, lifetime=100), face)
    clock.now += 0.1
    box.put(b"late")
    assert face.sent == [] and box.waiting.expired == 1


def test_too_far_ahead_or_too_many_are_dropped_as_held_full() -> None:
    clock = Clock()
    box = outbox(clock, max_waiting=2)
    box.handle(interest(HOLD_AHEAD), Path())
    assert box.counters["drop_held_full"] == 1 and len(box.waiting) == 0
    box.handle(interest(HOLD_AHEAD - 1), Path())
    box.handle(interest(1), Path())
    box.handle(interest(2), Path())
    assert box.counters["drop_held_full"] == 2 and box.waiting.refused == 1
    clock.now += 1.0  # both held expire: room again
    box.handle(interest(2), Path())
    assert box.counters["drop_held_full"] == 2 and len(box.waiting) == 1


def test_a_batch_every_reader_has_is_gone() -> None:
    clock = Clock()
    box = outbox(clock)
    box.put(b"b0")
    box.positions["r.0"] = (1, 1)
    box._forget()
    face = Path()
    box.handle(interest(0), face)
    assert face.sent == [] and box.counters["drop_batch_gone"] == 1
    assert len(box.waiting) == 0


def ack(box: Outbox, consumed: int) -> None:
    name = FlowNames.ack(STREAM, "r.0", consumed, consumed)
    box.handle(parse_interest(make_interest(name, lifetime=1000)), Path())


def test_lead_stops_the_producer_when_its_reader_is_that_far_behind_in_time() -> None:
    """With room for 8 batches, the producer still stops once the oldest batch its reader
    has not consumed was put ``lead`` seconds ago, and goes on when the reader reports."""
    clock = Clock()
    ep: Any = FakeEndpoint()
    box = Outbox(ep, STREAM, ["r.0"], buffer=8, counters=Counter(), clock=clock, lead=0.01)
    box.put(b"b0")
    box.put(b"b1")
    box._update_room()
    assert box._room.is_set()  # 2 of 8 batches ahead, the oldest put just now
    clock.now += 0.011
    box._update_room()
    assert not box._room.is_set()  # b0 waits for its reader longer than the lead
    ack(box, 1)  # the reader has b0; b1 was put as long ago
    assert not box._room.is_set()
    ack(box, 2)  # nothing ahead of the reader
    assert box._room.is_set()
    box.put(b"b2")
    clock.now += 0.005
    box._update_room()
    assert box._room.is_set()  # b2 waits less than the lead


def test_the_only_readers_batch_interests_move_its_position_without_reports() -> None:
    """A reader asks for batch s only once it has taken s - window: with one reader that is
    push-back enough; with two, an Interest cannot be told apart and moves nobody."""
    clock = Clock()
    ep: Any = FakeEndpoint()
    box = Outbox(ep, STREAM, ["r.0"], buffer=2, counters=Counter(), clock=clock, reader_window=4)
    for i in range(2):
        box.put(b"b%d" % i)
    assert not box._room.is_set()  # 2 ahead of a reader that has said nothing
    box.handle(interest(4), Path())  # asked with a reorder buffer of 4: it has taken b0
    assert box.positions["r.0"] == (1, 0) and box._room.is_set()
    box.handle(interest(2), Path())  # an older Interest (a retransmission) moves nothing back
    assert box.positions["r.0"] == (1, 0)
    shared = Outbox(
        ep, STREAM, ["r.0", "r.1"], buffer=2, counters=Counter(), clock=clock, reader_window=4
    )
    for i in range(2):
        shared.put(b"b%d" % i)
    shared.handle(interest(5), Path())
    assert shared.positions == {"r.0": (0, 0), "r.1": (0, 0)} and not shared._room.is_set()
