"""The largest packet a face carries: 4 MiB on local faces (in-memory here), NDN's 8800 bytes on
network faces.  A packet over the face's limit is dropped and counted, never sent (nor cut into
fragments); one received over it, whole or reassembled, is dropped and counted too."""

from __future__ import annotations

from collections import Counter

from forwarder.face.face import Face
from forwarder.face.memory import memory_pair
from forwarder.face.transport import Transport
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri
from tests.unit.face.helpers import ManualSoon, RecordingSink

NAME = from_uri("/limit/x")


def data_of_size(size: int) -> bytes:
    """A Data packet whose wire is exactly ``size`` bytes."""
    probe = len(make_data(NAME, bytes(size)))  # the same TLV-LENGTH widths as the answer
    wire = make_data(NAME, bytes(2 * size - probe))
    assert len(wire) == size
    return wire


def interest_of_size(size: int) -> bytes:
    probe = len(make_interest(NAME, nonce=b"1234", app_params=bytes(size)))
    wire = make_interest(NAME, nonce=b"1234", app_params=bytes(2 * size - probe))
    assert len(wire) == size
    return wire


class Link:
    """Two faces on a memory pair; ``network`` gives an end the limit of a UDP or TCP face."""

    def __init__(
        self, mtu: int | None = None, network_a: bool = False, network_b: bool = False
    ) -> None:
        self.counters: Counter[str] = Counter()
        self.soon = ManualSoon()
        ta, tb = memory_pair(self.counters, mtu=mtu, call_soon=self.soon)
        self.wire_a: list[bytes] = []
        for transport, network in ((ta, network_a), (tb, network_b)):
            if network:
                transport.max_packet = T.MAX_PACKET_SIZE
        self.a, self.b = Face(ta), Face(tb)
        self.sink_b = RecordingSink()
        self.b.sink = self.sink_b
        send = ta.send

        def spy(wire: bytes) -> None:
            self.wire_a.append(wire)
            send(wire)

        self.a.link.output = spy

    def run(self) -> None:
        self.soon.run()


def test_transports_default_to_the_network_limit_and_memory_is_local() -> None:
    ta, _ = memory_pair(Counter())
    assert ta.max_packet == T.MAX_LOCAL_PACKET_SIZE
    assert Transport.__init__.__kwdefaults__["max_packet"] == T.MAX_PACKET_SIZE


def test_in_memory_face_carries_a_local_packet_of_the_largest_size() -> None:
    link = Link()
    biggest = data_of_size(T.MAX_LOCAL_PACKET_SIZE)
    link.a.send_data(biggest, pit_token=b"tk")
    link.a.send_data(data_of_size(T.MAX_LOCAL_PACKET_SIZE + 1))
    link.run()
    assert [w for _, w, _ in link.sink_b.data] == [biggest]
    assert link.counters["face.drop_oversize"] == 1
    assert link.counters["face.drop_send_queue_full"] == 0


def test_network_face_sends_8800_and_drops_larger_without_fragmenting() -> None:
    link = Link(mtu=1400, network_a=True)
    fits = data_of_size(T.MAX_PACKET_SIZE)
    link.a.send_data(fits)
    link.run()
    assert len(link.wire_a) > 1  # 8800 bytes over a 1400-byte MTU: fragments, as before
    assert [w for _, w, _ in link.sink_b.data] == [fits]
    link.wire_a.clear()
    link.a.send_data(data_of_size(T.MAX_PACKET_SIZE + 1), pit_token=b"tk")
    link.a.send_data(data_of_size(1 << 20))
    link.a.send_interest(interest_of_size(T.MAX_PACKET_SIZE + 1))
    link.a.send_nack(interest_of_size(20_000), T.NACK_NO_ROUTE)
    link.run()
    assert link.wire_a == [] and link.sink_b.total == 1
    assert link.counters["face.drop_oversize"] == 4
    assert link.counters["face.fragment_error"] == 0


def test_network_face_drops_a_larger_packet_received_whole_or_in_fragments() -> None:
    link = Link(mtu=1400, network_b=True)  # a sender that does not keep the limit
    link.a.send_data(data_of_size(20_000))
    link.run()
    assert len(link.wire_a) > 1 and link.sink_b.data == []
    # in fragments: dropped as soon as its pieces pass the limit, never held until whole
    assert link.counters["reassembly.too_large"] >= 1 and link.counters["face.oversize"] == 0
    unfragmented = Link(network_b=True)
    unfragmented.a.send_data(data_of_size(20_000))
    unfragmented.a.send_data(data_of_size(T.MAX_PACKET_SIZE))
    unfragmented.run()
    assert [len(w) for _, w, _ in unfragmented.sink_b.data] == [T.MAX_PACKET_SIZE]
    assert unfragmented.counters["face.oversize"] == 1


def test_a_packet_one_octet_over_the_limit_is_dropped_bare_or_in_an_lp_packet() -> None:
    """The frame limit leaves 256 octets for an NDNLPv2 header; the packet itself still may
    not exceed the face's limit (found by the daemon fuzz test: 8801-byte bare Data passed)."""
    link = Link(network_b=True)
    link.a.send_data(data_of_size(T.MAX_PACKET_SIZE + 1))
    link.a.send_data(data_of_size(T.MAX_PACKET_SIZE + 1), pit_token=b"tk")
    link.a.send_interest(interest_of_size(T.MAX_PACKET_SIZE + 1))
    link.a.send_data(data_of_size(T.MAX_PACKET_SIZE), pit_token=b"tk")
    link.run()
    assert [len(w) for _, w, _ in link.sink_b.data] == [T.MAX_PACKET_SIZE]
    assert link.sink_b.interests == []
    assert link.counters["face.oversize"] == 3
