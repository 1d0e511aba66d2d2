"""NDNLPv2 link service: encode/decode round trips over an in-memory pair, fragmentation, and
malformed input that must be counted, never raised."""

from __future__ import annotations

from collections import Counter

import pytest

from forwarder.face.face import Face
from forwarder.face.link_service import LinkService
from forwarder.face.memory import memory_pair
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import encode_lp, parse_lp
from icn.wire.name import from_uri
from icn.wire.tlv import encode_tlv
from tests.unit.face.helpers import ManualSoon, RecordingSink

INTEREST = make_interest(from_uri("/ndn/test"), nonce=b"\x01\x02\x03\x04", lifetime=1000)
DATA = make_data(from_uri("/ndn/test"), b"hi", freshness=1000)
# The packet format's Interest example: /ndn/test, CanBePrefix, MustBeFresh, Nonce 01020304,
# Lifetime 1000 ms
SPEC_INTEREST = bytes.fromhex("051b070b08036e646e080474657374210012000a04010203040c0203e8")


class Link:
    """Two faces joined by a memory pair, with recording sinks and hand-run delivery."""

    def __init__(self, mtu: int | None = None) -> None:
        self.counters: Counter[str] = Counter()
        self.soon = ManualSoon()
        ta, tb = memory_pair(self.counters, mtu=mtu, call_soon=self.soon)
        self.a, self.b = Face(ta), Face(tb)
        self.a.face_id, self.b.face_id = 300, 301
        self.sink_a, self.sink_b = RecordingSink(), RecordingSink()
        self.a.sink, self.b.sink = self.sink_a, self.sink_b
        self.wire_a: list[bytes] = []  # link packets a put on the wire
        send = ta.send

        def spy(wire: bytes) -> None:
            self.wire_a.append(wire)
            send(wire)

        self.a.link.output = spy

    def run(self) -> None:
        self.soon.run()


def test_interest_travels_bare() -> None:
    link = Link()
    link.a.send_interest(INTEREST)
    assert link.sink_b.interests == []  # delivery is deferred, never re-entrant
    link.run()
    assert link.wire_a == [INTEREST]
    assert link.sink_b.interests == [(301, INTEREST, None)]
    assert link.b.stats.n_in_interests == 1 and link.a.stats.n_out_interests == 1


def test_data_without_fields_travels_bare() -> None:
    link = Link()
    link.a.send_data(DATA)
    link.run()
    assert link.wire_a == [DATA]
    assert link.sink_b.data == [(301, DATA, None)]


def test_data_with_pit_token_round_trip() -> None:
    link = Link()
    link.a.send_data(DATA, pit_token=b"\xa1\xb2\xc3\xd4")
    link.run()
    (wire,) = link.wire_a
    assert wire[0] == T.LP_PACKET
    face_id, got, lp = link.sink_b.data[0]
    assert (face_id, got) == (301, DATA)
    assert lp is not None and lp.pit_token == b"\xa1\xb2\xc3\xd4" and lp.congestion_mark == 0


def test_congestion_mark_propagated() -> None:
    link = Link()
    link.a.send_data(DATA, congestion_mark=1)
    link.run()
    lp = link.sink_b.data[0][2]
    assert lp is not None and lp.congestion_mark == 1 and lp.pit_token is None


def test_nack_round_trip_with_reason_and_token() -> None:
    link = Link()
    link.a.send_nack(INTEREST, T.NACK_NO_ROUTE, pit_token=b"\x07")
    link.run()
    assert link.sink_b.interests == []
    face_id, interest, lp = link.sink_b.nacks[0]
    assert (face_id, interest) == (301, INTEREST)
    assert lp.nack_reason == T.NACK_NO_ROUTE and lp.pit_token == b"\x07"
    assert link.b.stats.n_in_nacks == 1 and link.a.stats.n_out_nacks == 1


def test_nack_matches_spec_vector() -> None:
    """NDNLPv2: Nack(NoRoute) of that Interest."""
    link = Link()
    link.a.send_nack(SPEC_INTEREST, T.NACK_NO_ROUTE)
    assert link.wire_a[0] == bytes.fromhex("6428fd032005fd03210196501d") + SPEC_INTEREST


def test_lp_packet_with_only_fragment_is_unwrapped() -> None:
    link = Link()
    link.b.link.receive(encode_lp(INTEREST))
    _, wire, lp = link.sink_b.interests[0]
    assert wire == INTEREST and lp is not None


def test_incoming_face_id_from_the_wire_is_ignored() -> None:
    link = Link()
    link.b.link.receive(encode_lp(INTEREST, incoming_face_id=42))
    lp = link.sink_b.interests[0][2]
    assert lp is not None and lp.incoming_face_id is None


def test_next_hop_face_id_kept_on_local_face_dropped_on_remote() -> None:
    link = Link()  # memory faces are local
    link.b.link.receive(encode_lp(INTEREST, next_hop_face_id=5))
    lp = link.sink_b.interests[0][2]
    assert lp is not None and lp.next_hop_face_id == 5

    counters: Counter[str] = Counter()
    remote = LinkService(counters=counters, is_local=False)
    sink = RecordingSink()
    remote.sink = sink
    remote.receive(encode_lp(INTEREST, next_hop_face_id=5))
    assert sink.total == 0 and counters["face.lp_field_not_allowed"] == 1


def test_cache_policy_kept_on_data() -> None:
    link = Link()
    link.b.link.receive(encode_lp(DATA, cache_policy=T.CACHE_POLICY_NO_CACHE))
    lp = link.sink_b.data[0][2]
    assert lp is not None and lp.cache_policy == T.CACHE_POLICY_NO_CACHE


def test_fragmentation_over_small_mtu() -> None:
    link = Link(mtu=200)
    big = make_data(from_uri("/big/object"), bytes(range(256)) * 8)
    assert len(big) > 2000
    link.a.send_data(big, pit_token=b"tok", congestion_mark=1)
    link.run()
    assert len(link.wire_a) > 10
    assert all(len(w) <= 200 for w in link.wire_a)
    assert all(w[0] == T.LP_PACKET for w in link.wire_a)
    _, wire, lp = link.sink_b.data[0]
    assert wire == big and lp is not None
    assert lp.pit_token == b"tok" and lp.congestion_mark == 1
    assert link.b.stats.n_in_data == 1


def test_fragmented_nack_reassembles() -> None:
    link = Link(mtu=120)
    interest = make_interest(from_uri("/n"), app_params=b"x" * 500)
    link.a.send_nack(interest, T.NACK_CONGESTION)
    link.run()
    assert len(link.wire_a) > 1
    assert link.sink_b.nacks[0][1] == interest
    assert link.sink_b.nacks[0][2].nack_reason == T.NACK_CONGESTION


def test_small_packets_not_fragmented_on_mtu_face() -> None:
    link = Link(mtu=1400)
    link.a.send_interest(INTEREST)
    link.run()
    assert link.wire_a == [INTEREST]


def test_fragments_out_of_order_and_missing() -> None:
    link = Link(mtu=150)
    big = make_data(from_uri("/x"), b"z" * 1000)
    link.a.send_data(big)
    pieces = list(link.wire_a)
    assert len(pieces) > 3
    recv = link.b.link.receive
    for piece in reversed(pieces[1:]):
        recv(piece)
    assert link.sink_b.data == []  # still missing fragment 0
    recv(pieces[0])
    assert link.sink_b.data[0][1] == big
    for piece in pieces[:-1]:  # a second copy with its last piece lost: nothing comes out
        recv(piece)
    assert len(link.sink_b.data) == 1


def test_fragments_of_a_message_past_the_faces_largest_packet_are_not_kept() -> None:
    link = Link(mtu=150)
    link.b.link.max_packet = 600  # the receiving face's limit; the message is 1000+
    big = make_data(from_uri("/x"), b"z" * 1000)
    link.a.send_data(big)
    link.run()
    assert link.sink_b.data == []
    # dropped by the reassembler once its pieces passed 600 octets, not held until whole
    assert link.counters["reassembly.too_large"] >= 1


@pytest.mark.parametrize(
    ("wire", "counter"),
    [
        (b"", "face.malformed"),
        (INTEREST[:-3], "face.malformed"),  # truncated
        (INTEREST + b"\x00", "face.malformed"),  # trailing garbage
        (b"\x07\x03\x08\x01a", "face.unknown_type"),  # a Name at top level
        (b"\xfd\x01\x00\x00", "face.unknown_type"),
        (encode_lp(None, pit_token=b"t"), "face.lp_no_fragment"),
        (encode_lp(DATA, nack_reason=T.NACK_NO_ROUTE), "face.nack_not_interest"),
        (encode_lp(encode_lp(INTEREST)), "face.unknown_type"),  # LpPacket inside LpPacket
        (encode_lp(INTEREST, cache_policy=1), "face.lp_field_not_allowed"),
        (encode_lp(DATA, next_hop_face_id=3), "face.lp_field_not_allowed"),
        (encode_lp(b"\x05\x10abc"), "face.malformed"),  # fragment truncated
        # header fields out of order: CongestionMark (832) before PitToken (98)
        (
            encode_tlv(
                T.LP_PACKET,
                encode_tlv(T.LP_CONGESTION_MARK, b"\x01")
                + encode_tlv(T.LP_PIT_TOKEN, b"t")
                + encode_tlv(T.LP_FRAGMENT, INTEREST),
            ),
            "face.malformed",
        ),
        # unknown LP field that may not be ignored (odd type in [800, 959])
        (
            encode_tlv(T.LP_PACKET, encode_tlv(801 + 60, b"") + encode_tlv(80, DATA)),
            "face.malformed",
        ),
        # FragIndex >= FragCount
        (encode_lp(DATA, sequence=1, frag_index=3, frag_count=2), "face.malformed"),
    ],
)
def test_malformed_input_counted_not_raised(wire: bytes, counter: str) -> None:
    link = Link()
    link.b.link.receive(wire)
    assert link.sink_b.total == 0
    assert link.counters[counter] == 1, link.counters


def test_spec_vector_parses_as_expected() -> None:
    """A wire Nack built by hand (NDNLPv2's Nack) reaches the sink as a Nack."""
    nack = bytes.fromhex("6428fd032005fd03210196501d") + SPEC_INTEREST
    link = Link()
    link.b.link.receive(nack)
    assert link.sink_b.nacks[0][1] == SPEC_INTEREST
    assert parse_lp(nack).nack_reason == T.NACK_NO_ROUTE


def test_sink_exception_is_contained() -> None:
    class Boom(RecordingSink):
        def receive_interest(self, face_id: int, wire: bytes, lp: object) -> None:
            raise RuntimeError("sink bug")

    link = Link()
    link.b.sink = Boom()
    link.b.link.receive(INTEREST)
    link.b.link.receive(INTEREST)
    assert link.counters["face.receive_error"] == 2


def test_no_sink_counts_drop() -> None:
    link = Link()
    link.b.sink = None
    link.b.link.receive(INTEREST)
    assert link.counters["face.no_sink"] == 1


def test_bad_pit_token_on_send_is_counted() -> None:
    link = Link()
    link.a.send_data(DATA, pit_token=b"x" * 33)
    assert link.wire_a == [] and link.counters["face.encode_error"] == 1
