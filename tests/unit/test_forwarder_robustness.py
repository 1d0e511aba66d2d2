"""Faces and pipelines together, in one process: fuzzed packets and an Interest flood.

Real Face objects (link service + memory transport) feed a real Forwarder; deliveries are run by
hand, so no socket and no sleep is involved and every count is exact.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from forwarder.face.face import Face
from forwarder.face.face_table import FaceTable
from forwarder.face.memory import MemoryTransport, memory_pair
from forwarder.fw.forwarder import Forwarder
from forwarder.table.limits import TableLimits
from icn.encode import make_data, make_interest
from icn.errors import DecodeError
from icn.lp import parse_lp
from icn.name import from_uri, generic
from icn.packet import parse_interest
from tests.unit.icn.test_codec_fuzz import Mutator, seeds

# Counters that mean "this packet was dropped at the face" (one per packet).
FACE_DROPS = (
    "face.malformed",
    "face.unknown_type",
    "face.lp_no_fragment",
    "face.nack_not_interest",
    "face.lp_field_not_allowed",
    "face.no_sink",
)
PIPELINE_INPUTS = ("fw.in_interest", "fw.in_data", "fw.in_nack")


class Node:
    """A forwarder with faces whose far ends the test drives by hand."""

    def __init__(self, limits: TableLimits | None = None) -> None:
        self.counters: Counter[str] = Counter()
        self.fw = Forwarder(limits or TableLimits(), self.counters)
        self.table = FaceTable(
            self.counters,
            sink=self.fw,
            on_face_closed=self.fw.remove_face,
            on_face_added=self.fw.add_face,
        )
        self._calls: list[Callable[[], None]] = []

    def attach(self, name: str) -> tuple[int, MemoryTransport, list[bytes]]:
        """A face on the forwarder; returns its id, the app end and what the app received."""
        near, far = memory_pair(
            self.counters, name=name, queue_limit=1 << 30, call_soon=self._calls.append
        )
        face_id = self.table.add(Face(near))
        received: list[bytes] = []
        far.bind(received.append, lambda: None)
        return face_id, far, received

    def run(self) -> None:
        """Deliver everything queued, including what the deliveries queue (bounded)."""
        for _ in range(1000):
            if not self._calls:
                return
            # the transports hold this list's append: drain it in place, never replace it
            calls = self._calls[:]
            del self._calls[:]
            for call in calls:
                call()
        raise AssertionError("deliveries did not settle")


def good_exchange(
    node: Node,
    consumer: MemoryTransport,
    got: list[bytes],
    producer: MemoryTransport,
    asked: list[bytes],
    name: bytes,
) -> None:
    """One Interest/Data exchange through the forwarder must still work."""
    got.clear()
    asked.clear()
    consumer.send(make_interest(name, lifetime=2000))
    node.run()
    assert asked, "the Interest was not forwarded to the producer"
    assert parse_interest(asked[-1]).name == name
    producer.send(make_data(name, b"still forwarding", freshness=1000))
    node.run()
    assert any(w[:1] == b"\x06" and name in w for w in got), "the Data did not come back"


def test_100k_mutated_packets_no_exception_every_drop_counted() -> None:
    node = Node()
    attacker_id, attacker, _ = node.attach("attacker")
    _, consumer, got = node.attach("consumer")
    producer_id, producer, asked = node.attach("producer")
    # route the fuzz corpus's names and the good traffic to the producer face
    node.fw.fib.add_nexthop(b"", producer_id)
    node.fw.fib.add_nexthop(from_uri("/good"), producer_id)

    mutator = Mutator(random.Random(20261121), seeds())
    total = 100_000
    fragments = 0
    for i in range(total):
        wire = mutator.next()
        try:
            if parse_lp(wire).frag_count > 1:
                fragments += 1  # several pieces make one packet: counted separately below
        except DecodeError:
            pass
        attacker.send(wire)
        if i % 500 == 0:
            node.run()
            asked.clear()  # the producer ignores the fuzz that reached it
        if i % 20_000 == 0:
            good_exchange(node, consumer, got, producer, asked, from_uri(f"/good/{i}"))
    node.run()
    c = node.counters
    # no exception was caught anywhere: not in the faces, not in the pipelines
    assert c["face.receive_error"] == 0
    assert attacker_id in node.table, "the fuzz must not close an in-memory face"
    # every packet either reached a pipeline or was dropped and counted at the face;
    # only fragment pieces can be held (or merged into one packet) by reassembly
    accounted = sum(c[k] for k in PIPELINE_INPUTS + FACE_DROPS)
    good = 2 * (total // 20_000 + 1)  # the good exchanges' Interests and Data
    assert total - fragments <= accounted - good <= total
    # inside the pipelines, malformed packets are dropped and counted too
    assert c["fw.drop_malformed_interest"] + c["fw.drop_malformed_data"] > 0
    assert c["face.malformed"] > 0
    good_exchange(node, consumer, got, producer, asked, from_uri("/good/final"))


def test_flood_of_200k_distinct_interests_keeps_pit_at_cap() -> None:
    cap = 5_000
    node = Node(TableLimits(pit_max_entries=cap))
    _, consumer, _ = node.attach("flooder")
    upstream_id, _, forwarded = node.attach("black-hole")
    node.fw.fib.add_nexthop(from_uri("/flood"), upstream_id)
    base = from_uri("/flood")
    total = 200_000
    for i in range(total):
        consumer.send(make_interest(base + generic(str(i)), lifetime=60_000))
        if i % 1000 == 999:
            node.run()
            assert len(node.fw.pit) <= cap
    node.run()
    c = node.counters
    assert len(node.fw.pit) == cap
    assert c["fw.drop_pit_full"] == total - cap
    assert c["pit.refused_full"] == total - cap
    assert len(forwarded) == cap  # only admitted Interests went upstream
    assert c["fw.in_interest"] == total
