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
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import parse_lp
from icn.wire.name import from_uri, generic
from icn.wire.packet import parse_interest
from tests.fuzz_packets import Mutator, seeds

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

    def attach(self, name: str, is_local: bool = True) -> tuple[int, MemoryTransport, list[bytes]]:
        """A face on the forwarder (of network scope unless ``is_local``); returns its id, the
        app end and what the app received."""
        near, far = memory_pair(
            self.counters, name=name, queue_limit=1 << 30, call_soon=self._calls.append
        )
        face = Face(near)
        face.set_scope(is_local)
        face_id = self.table.add(face)
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


def test_flood_of_200k_long_interests_from_one_peer_locks_nobody_out() -> None:
    cap = 5_000
    limits = TableLimits(pit_max_entries=cap)
    node = Node(limits)
    flooder_id, flooder, nacks = node.attach("flooder", is_local=False)
    _, peer, peer_got = node.attach("second-peer", is_local=False)
    _, app, app_got = node.attach("local-app")
    hole_id, _, forwarded = node.attach("black-hole")
    producer_id, producer, asked = node.attach("producer")
    mgmt_id, mgmt, mgmt_asked = node.attach("management")
    node.fw.fib.add_nexthop(from_uri("/flood"), hole_id)
    node.fw.fib.add_nexthop(from_uri("/good"), producer_id)
    node.fw.fib.add_nexthop(from_uri("/localhost/nfd"), mgmt_id)
    base = from_uri("/flood")
    total = 200_000
    rng = random.Random(15)
    served = 0
    for i in range(total):
        # 600 s lifetimes: without a bound each entry would pin its room for ten minutes
        flooder.send(make_interest(base + generic(str(i)), lifetime=600_000))
        if i % 1000 == 999:
            node.run()
            assert len(node.fw.pit) <= cap
            assert node.fw.pit.shares.held_by(flooder_id) <= cap // 4
            if rng.random() < 0.2:
                # mid-flood, the second peer and a local app (management) are still served
                name = from_uri(f"/good/{i}")
                good_exchange(node, peer, peer_got, producer, asked, name)
                cmd = from_uri(f"/localhost/nfd/status/general/{i}")
                good_exchange(node, app, app_got, mgmt, mgmt_asked, cmd)
                served += 1
    node.run()
    assert served > 10
    c = node.counters
    share = cap // 4
    assert node.fw.pit.shares.held_by(flooder_id) == share
    assert len(forwarded) == share  # only admitted Interests went upstream
    refused = total - share
    assert c["fw.drop_pit_full"] == refused
    assert c["pit.refused_face_share"] == refused and c["pit.refused_full"] == 0
    assert node.fw.refused_by_face == {flooder_id: refused}
    # every refusal was answered at once with a Nack Congestion carrying the Interest
    lp_nacks = [parse_lp(w) for w in nacks]
    assert len(lp_nacks) == refused
    assert all(lp.nack_reason == T.NACK_CONGESTION for lp in lp_nacks)
    assert c["fw.lifetime_capped"] == share
    # the flood's entries go after the 60 s bound, not after 600 s: the table is free again
    later = node.fw.clock() + 61.0
    node.fw.clock = lambda: later
    node.fw.tick()
    assert len(node.fw.pit) == 0


def test_flooders_cannot_take_the_room_kept_for_local_faces() -> None:
    cap = 1_000
    node = Node(TableLimits(pit_max_entries=cap, face_share=0.5, local_reserve=0.2))
    hole_id, _, _ = node.attach("black-hole")
    node.fw.fib.add_nexthop(from_uri("/flood"), hole_id)
    flooders = []
    for k in range(4):
        flooders.append(node.attach(f"flooder-{k}", is_local=False)[1])
    for i in range(1_000):
        for k, far in enumerate(flooders):
            far.send(make_interest(from_uri(f"/flood/{k}/{i}"), lifetime=4000))
    node.run()
    assert len(node.fw.pit) == 800  # non-local faces together: all but the 20 % reserve
    assert node.counters["pit.refused_reserve"] > 0
    _, app, _ = node.attach("local-app")
    for i in range(200):
        app.send(make_interest(from_uri(f"/flood/app/{i}"), lifetime=4000))
    node.run()
    assert len(node.fw.pit) == cap  # the local app had the reserve to itself
    assert node.counters["pit.refused_full"] == 0
