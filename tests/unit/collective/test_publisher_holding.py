"""The chunk publisher's answers on a hand-driven clock, no loop and no network: a chunk asked
for before it exists is held and sent once per reply path when published; late, forgotten or
too many are dropped and counted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compute.collective.names import JobNames
from compute.collective.publisher import ChunkPublisher, Key
from icn.dataplane.segments import data_content
from icn.wire.encode import DataParts, make_interest
from icn.wire.packet import InterestView, parse_data, parse_interest

PREFIX = JobNames("/ar").worker_prefix("w0")


class FakeEndpoint:
    signer = None  # unsigned Data: the Content ends the packet


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


class Path:
    """A reply path: what it was sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.parts: list[DataParts] = []

    def __call__(self, wire: bytes | DataParts) -> None:
        if isinstance(wire, DataParts):
            self.parts.append(wire)
            wire = wire.join()
        self.sent.append(wire)


def interest(*numbers: int, lifetime: int = 1000) -> InterestView:
    return parse_interest(make_interest(JobNames.piece(PREFIX, *numbers), lifetime=lifetime))


def publisher(
    clock: Clock, *, max_waiting: int = 16, on_missing: Callable[[Key], None] | None = None
) -> ChunkPublisher:
    ep: Any = FakeEndpoint()
    return ChunkPublisher(
        ep, PREFIX, keep_rounds=2, on_missing=on_missing, max_waiting=max_waiting, clock=clock
    )


def test_a_chunk_asked_for_early_is_sent_once_per_reply_path_when_published() -> None:
    clock = Clock()
    asked: list[Key] = []
    pub = publisher(clock, on_missing=asked.append)
    face, other = Path(), Path()
    pub.handle(interest(0, 3), face)
    clock.now += 0.5
    pub.handle(interest(0, 3), face)  # a retransmission, on the path it repeats
    pub.handle(interest(0, 3), other)
    assert asked == [(0, 3)]  # computed once
    assert face.sent == [] and len(pub.waiting) == 2
    pub.put((0, 3), b"sum")
    assert len(face.sent) == 1 and face.sent == other.sent
    assert data_content(parse_data(face.sent[0])) == b"sum"
    assert pub.counters["held_answered"] == 2
    assert pub.counters["bytes_sent"] == len(face.sent[0])  # the first answer of this name
    assert pub.counters["chunks_resent"] == 1  # the second reached the source again
    assert len(pub.waiting) == 0


def test_a_chunk_already_published_is_answered_at_once() -> None:
    clock = Clock()
    pub = publisher(clock)
    pub.put((0, 1), b"x")
    face = Path()
    pub.handle(interest(0, 1), face)
    assert len(face.sent) == 1 and len(pub.waiting) == 0


def test_an_interest_that_expired_while_held_is_not_answered() -> None:
    clock = Clock()
    pub = publisher(clock)
    face = Path()
    pub.handle(interest(0, 0, lifetime=200), face)
    clock.now += 0.3
    pub.put((0, 0), b"late")
    assert face.sent == [] and pub.counters["held_answered"] == 0
    assert pub.waiting.expired == 1


def test_expired_interests_make_room_for_new_ones() -> None:
    clock = Clock()
    pub = publisher(clock, max_waiting=2)
    pub.handle(interest(0, 0, lifetime=100), Path())
    pub.handle(interest(0, 1, lifetime=100), Path())
    pub.handle(interest(0, 2), Path())
    assert pub.counters["drop_held_full"] == 1  # full of live ones
    clock.now += 0.2
    face = Path()
    pub.handle(interest(0, 2), face)  # the first two expired: room again
    assert pub.counters["drop_held_full"] == 1
    pub.put((0, 2), b"y")
    assert len(face.sent) == 1


def test_a_full_table_refuses_and_does_not_start_the_chunk() -> None:
    clock = Clock()
    asked: list[Key] = []
    pub = publisher(clock, max_waiting=1, on_missing=asked.append)
    pub.handle(interest(0, 0), Path())
    pub.handle(interest(0, 1), Path())
    assert asked == [(0, 0)]
    assert pub.counters["drop_held_full"] == 1 and pub.waiting.refused == 1


def test_rounds_forgotten_let_go_of_what_waited_for_them() -> None:
    clock = Clock()
    pub = publisher(clock)
    old, new = Path(), Path()
    pub.handle(interest(0, 5), old)
    pub.handle(interest(2, 5), new)
    pub.put((2, 0), b"r2")  # round 2 with keep_rounds=2 forgets round 0
    assert 0 not in {k[0] for k in pub.waiting} and pub.waiting.dropped == 1
    pub.handle(interest(0, 5), Path())
    assert pub.counters["drop_round_gone"] == 1
    pub.put((2, 5), b"r2c5")
    assert len(new.sent) == 1 and old.sent == []


def test_a_name_of_another_shape_is_dropped_and_counted() -> None:
    pub = publisher(Clock())
    pub.handle(interest(0), Path())
    assert pub.counters["drop_bad_name"] == 1 and len(pub.waiting) == 0


def test_a_chunk_put_as_a_view_is_sent_uncopied_until_its_round_is_retired() -> None:
    clock = Clock()
    pub = publisher(clock)
    payload = bytearray(b"gradient")
    pub.put((0, 0), memoryview(payload), b"h:", view=True)
    face = Path()
    pub.handle(interest(0, 0), face)
    assert face.parts[0].content.obj is payload  # the caller's buffer, not a copy
    assert data_content(parse_data(face.sent[0])) == b"h:gradient"
    pub.retire(0)  # every chunk consumed: the owner may change its array now
    late = Path()
    pub.handle(interest(0, 0), late)
    pub.put((0, 1), b"after")  # a straggling put of a retired round is ignored
    pub.handle(interest(0, 1), late)
    assert late.sent == [] and len(pub.waiting) == 0
    assert pub.counters["drop_round_done"] == 2


def test_a_detached_round_keeps_serving_the_bytes_of_the_put() -> None:
    clock = Clock()
    pub = publisher(clock)
    payload = bytearray(b"gradient")
    pub.put((0, 0), memoryview(payload), b"h:", view=True)
    pub.detach(0)  # the operation failed: others may still pull, the owner may write
    payload[:] = b"changed!"
    face = Path()
    pub.handle(interest(0, 0), face)
    assert face.parts == [] and data_content(parse_data(face.sent[0])) == b"h:gradient"
