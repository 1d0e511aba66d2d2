"""Incoming Interest pipeline: forwarding, loops, retransmissions, CS, HopLimit, scope."""

from __future__ import annotations

from forwarder.table.limits import TableLimits
from icn.wire import tlv_types as T
from icn.wire.encode import make_interest
from icn.wire.name import from_uri
from icn.wire.packet import parse_data, parse_interest
from icn.wire.tlv import encode_tlv

from .fakes import Net, data, interest, nonce

TOKEN1 = b"\xa1\xa1"
TOKEN2 = b"\xb2\xb2\xb2"


def test_forwards_to_fib_nexthop_without_pit_token() -> None:
    net = Net()
    net.route("/a", 3)
    wire = interest("/a/b")
    net.interest(1, wire, pit_token=TOKEN1)
    assert net.sent() == {3: [("interest", wire, None, None)]}
    assert net.counters["fw.in_interest"] == 1
    assert net.counters["fw.out_interest"] == 1
    entry = next(iter(net.fw.pit))
    assert list(entry.in_records) == [1] and entry.in_records[1].pit_token == TOKEN1
    assert list(entry.out_records) == [3] and entry.out_records[3].nonce == nonce(1)


def test_longest_prefix_wins() -> None:
    net = Net()
    net.route("/a", 2)
    net.route("/a/b", 3)
    net.interest(1, interest("/a/b/c"))
    net.interest(1, interest("/a/x", 2))
    assert [i.name for i in net.faces[3].interests()] == [from_uri("/a/b/c")]
    assert [i.name for i in net.faces[2].interests()] == [from_uri("/a/x")]


def test_never_back_to_ingress_face() -> None:
    net = Net()
    net.route("/a", 1, cost=0)  # the cheapest route points back at the sender
    net.route("/a", 2, cost=10)
    net.interest(1, interest("/a"))
    assert list(net.sent()) == [2]


def test_no_route_nacks_ingress_with_its_own_interest_and_token() -> None:
    net = Net()
    net.route("/a", 1)  # only route is the ingress face itself
    wire = interest("/a/b", 7)
    net.interest(1, wire, pit_token=TOKEN1)
    assert net.sent() == {1: [("nack", wire, TOKEN1, T.NACK_NO_ROUTE)]}
    assert len(net.fw.pit) == 0
    assert net.counters["fw.nack_no_route"] == 1
    assert net.counters["fw.interest_unsatisfied"] == 1


def test_aggregation_one_upstream_interest_data_to_both_once() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/b", 1), pit_token=TOKEN1)
    net.interest(2, interest("/a/b", 2), pit_token=TOKEN2)
    assert len(net.faces[3].of("interest")) == 1
    assert net.counters["fw.aggregated"] == 1
    d = data("/a/b")
    net.data(3, d)
    assert net.faces[1].sent == [("data", d, TOKEN1, 0)]
    assert net.faces[2].sent == [("data", d, TOKEN2, 0)]
    assert len(net.fw.pit) == 0
    assert net.counters["fw.interest_satisfied"] == 1


def test_duplicate_nonce_from_other_face_is_a_loop() -> None:
    net = Net()
    net.route("/a", 3)
    wire = interest("/a/b", 5)
    net.interest(1, wire)
    net.clear()
    net.interest(2, wire, pit_token=TOKEN2)
    assert net.sent() == {2: [("nack", wire, TOKEN2, T.NACK_DUPLICATE)]}
    assert net.counters["fw.loop_pit"] == 1
    entry = next(iter(net.fw.pit))
    assert 2 not in entry.in_records  # a looping Interest leaves no state


def test_interest_coming_back_from_upstream_is_a_loop() -> None:
    net = Net()
    net.route("/a", 3)
    wire = interest("/a/b", 5)
    net.interest(1, wire)
    net.clear()
    net.interest(3, wire)  # our own out-record's nonce comes back
    assert net.sent() == {3: [("nack", wire, None, T.NACK_DUPLICATE)]}
    assert net.counters["fw.loop_pit"] == 1


def test_same_face_same_nonce_is_a_retransmission_not_a_loop() -> None:
    net = Net()
    net.route("/a", 3)
    wire = interest("/a/b", 5)
    net.interest(1, wire)
    net.clock.advance(0.020)  # past the 10 ms suppression interval
    net.interest(1, wire)
    assert net.faces[1].sent == []
    assert net.counters["fw.loop_pit"] == 0
    assert net.counters["fw.retransmission"] == 1
    assert len(net.faces[3].of("interest")) == 2


def test_dead_nonce_list_catches_loop_after_entry_expired() -> None:
    net = Net()
    net.route("/a", 3)
    wire = interest("/a/b", 5, lifetime=100)
    net.interest(1, wire)
    net.clock.advance(0.2)
    net.fw.tick()
    assert len(net.fw.pit) == 0
    net.clear()
    net.interest(2, wire, pit_token=TOKEN2)
    assert net.sent() == {2: [("nack", wire, TOKEN2, T.NACK_DUPLICATE)]}
    assert net.counters["fw.loop_dnl"] == 1
    # the DNL forgets after its lifetime (6 s): the same Interest is then forwarded again
    net.clear()
    net.clock.advance(6.5)
    net.interest(2, wire)
    assert list(net.sent()) == [3]


def test_cs_hit_is_served_without_forwarding() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/b", 1))
    d = data("/a/b")
    net.data(3, d)
    net.clear()
    net.interest(2, interest("/a/b", 2), pit_token=TOKEN2)
    assert net.sent() == {2: [("data", d, TOKEN2, 0)]}
    assert net.counters["fw.cs_hit"] == 1
    assert len(net.fw.pit) == 0


def test_cs_serve_off_forwards() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/b", 1))
    net.data(3, data("/a/b"))
    net.fw.cs.serve = False
    net.clear()
    net.interest(2, interest("/a/b", 2))
    assert list(net.sent()) == [3]


def test_aggregated_interest_skips_cs() -> None:
    """NFD looks in the CS only for an Interest nobody else waits for (NFD's onIncomingInterest)."""
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/b", 1, mbf=True))
    net.fw.cs.insert(parse_data(data("/a/b", freshness=10_000)), net.clock.t)
    net.clock.advance(0.020)
    net.interest(2, interest("/a/b", 2, mbf=True))
    assert net.faces[2].sent == []
    assert net.counters["fw.cs_hit"] == 0


def test_must_be_fresh_served_only_while_fresh() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/b", 1, mbf=True))
    d = data("/a/b", freshness=1000)
    net.data(3, d)
    net.clear()
    net.clock.advance(0.5)
    net.interest(2, interest("/a/b", 2, mbf=True))
    assert net.sent() == {2: [("data", d, None, 0)]}
    net.clear()
    net.clock.advance(1.0)
    net.interest(2, interest("/a/b", 3, mbf=True))
    assert list(net.sent()) == [3]  # stale: forwarded upstream
    # without MustBeFresh the stale Data still answers
    net.clear()
    net.interest(1, interest("/a/b", 4))
    assert net.sent() == {1: [("data", d, None, 0)]}


def test_can_be_prefix_from_cs() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/b/c", 1))
    d = data("/a/b/c")
    net.data(3, d)
    net.clear()
    net.interest(2, interest("/a/b", 2))  # exact /a/b: no match in the CS
    assert list(net.sent()) == [3]
    net.clear()
    net.interest(2, interest("/a/b", 3, cbp=True))
    assert net.sent() == {2: [("data", d, None, 0)]}


def test_hop_limit_zero_dropped() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", hop_limit=0))
    assert net.sent() == {}
    assert net.counters["fw.drop_hop_limit"] == 1
    assert len(net.fw.pit) == 0


def test_hop_limit_decremented_on_forward() -> None:
    net = Net()
    net.route("/a", 3)
    wire = interest("/a", hop_limit=5)
    net.interest(1, wire)
    (sent,) = net.faces[3].interests()
    assert sent.hop_limit == 4
    assert sent.nonce == nonce(1) and len(sent.wire) == len(wire)


def test_hop_limit_one_reaches_only_local_faces() -> None:
    net = Net(local=(4,))
    net.route("/a", 3)  # non-local: HopLimit would reach 0
    wire = interest("/a", hop_limit=1)
    net.interest(1, wire)
    assert net.sent() == {1: [("nack", wire, None, T.NACK_NO_ROUTE)]}
    net.clear()
    net.route("/b", 3, cost=0)
    net.route("/b", 4, cost=5)  # a local app: may still receive it, with HopLimit 0
    net.interest(1, interest("/b", 2, hop_limit=1))
    assert list(net.sent()) == [4]
    assert net.faces[4].interests()[0].hop_limit == 0


def test_localhost_from_non_local_face_dropped() -> None:
    net = Net(local=(2,))
    net.route("/localhost", 2)
    net.interest(1, interest("/localhost/nfd/status"))
    assert net.sent() == {}
    assert net.counters["fw.drop_scope"] == 1


def test_localhost_from_local_face_goes_only_to_local_faces() -> None:
    net = Net(local=(1, 2))
    net.route("/localhost/x", 3)  # non-local
    wire = interest("/localhost/x/y")
    net.interest(1, wire)
    assert net.sent() == {1: [("nack", wire, None, T.NACK_NO_ROUTE)]}
    net.clear()
    net.route("/localhost/x", 2, cost=9)
    net.interest(1, interest("/localhost/x/y", 2))
    assert list(net.sent()) == [2]


def test_localhop_from_non_local_face_not_forwarded_to_non_local() -> None:
    net = Net(local=(2,))
    net.route("/localhop", 3)
    net.interest(1, interest("/localhop/a"))
    assert list(net.sent()) == [1]  # NoRoute
    net.clear()
    net.interest(2, interest("/localhop/a", 2))  # from a local app: one hop allowed
    assert list(net.sent()) == [3]


def test_nonce_added_when_missing() -> None:
    net = Net()
    net.route("/a", 3)
    wire = encode_tlv(T.INTEREST, encode_tlv(T.NAME, from_uri("/a/b")))
    assert parse_interest(wire).nonce is None
    net.interest(1, wire)
    (sent,) = net.faces[3].interests()
    assert sent.nonce is not None and len(sent.nonce) == 4
    assert net.counters["fw.nonce_added"] == 1


def test_pit_full_nacks_congestion_with_the_interest_and_its_token() -> None:
    net = Net(limits=TableLimits(pit_max_entries=1))
    net.route("/a", 3)
    net.interest(1, interest("/a/1", 1))
    wire = interest("/a/2", 2)
    net.interest(2, wire, pit_token=TOKEN2)
    assert len(net.faces[3].of("interest")) == 1
    assert net.faces[2].sent == [("nack", wire, TOKEN2, T.NACK_CONGESTION)]
    assert net.counters["fw.drop_pit_full"] == 1 and net.counters["pit.refused_full"] == 1
    assert net.fw.refused_by_face == {2: 1}
    net.fw.remove_face(2)
    assert net.fw.refused_by_face == {}  # no count kept for a face that is gone


def test_one_face_gets_its_share_then_congestion_nacks_others_still_served() -> None:
    net = Net(limits=TableLimits(pit_max_entries=8, face_share=0.5, local_reserve=0.25))
    net.route("/a", 3)
    for i in range(10):
        net.interest(1, interest(f"/a/flood/{i}", i))
    assert len(net.faces[3].of("interest")) == 4
    assert [s[3] for s in net.faces[1].of("nack")] == [T.NACK_CONGESTION] * 6
    assert net.counters["pit.refused_face_share"] == 6
    net.clear()
    net.interest(2, interest("/a/other", 99))
    assert len(net.faces[3].of("interest")) == 1 and not net.faces[2].sent


def test_interest_lifetime_is_bounded_but_forwarded_unchanged() -> None:
    net = Net(limits=TableLimits(interest_lifetime_max_ms=5000))
    net.route("/a", 3)
    wire = interest("/a/long", 1, lifetime=600_000)
    net.interest(1, wire)
    assert net.faces[3].of("interest")[0][1] == wire  # not re-encoded
    entry = next(iter(net.fw.pit))
    assert entry.expiry == net.clock() + 5.0
    assert entry.in_records[1].expiry == net.clock() + 5.0
    assert net.counters["fw.lifetime_capped"] == 1
    net.clock.advance(2.0)
    net.interest(1, interest("/a/short", 2, lifetime=4000))
    assert net.counters["fw.lifetime_capped"] == 1
    net.clock.advance(3.0)  # the 600 s Interest's entry ends 5 s after it came
    net.fw.tick()
    assert [e.name for e in net.fw.pit] == [from_uri("/a/short")]


def test_next_hop_face_id_honoured_from_local_face_only() -> None:
    net = Net(local=(1,))
    net.route("/a", 3)
    net.interest(1, interest("/a", 1), next_hop_face_id=4)
    assert list(net.sent()) == [4]
    assert net.counters["fw.next_hop_face_id"] == 1
    net.clear()
    net.interest(2, interest("/a/2", 2), next_hop_face_id=4)  # from the network: ignored
    assert list(net.sent()) == [3]
    assert net.counters["fw.ignored_next_hop_face_id"] == 1


def test_next_hop_face_id_unknown_face_dropped() -> None:
    net = Net(local=(1,))
    net.interest(1, interest("/a"), next_hop_face_id=99)
    assert net.sent() == {}
    assert net.counters["fw.drop_next_hop_unknown"] == 1


def test_interest_lifetime_sets_entry_expiry_to_latest_in_record() -> None:
    net = Net()
    net.route("/a", 3)
    t0 = net.clock.t
    net.interest(1, interest("/a", 1, lifetime=1000))
    net.interest(2, interest("/a", 2, lifetime=3000))
    net.interest(4, interest("/a", 3, lifetime=2000))
    entry = next(iter(net.fw.pit))
    assert entry.expiry == t0 + 3.0


def test_unknown_face_and_malformed_interest_counted_not_raised() -> None:
    net = Net()
    net.interest(99, interest("/a"))
    assert net.counters["fw.drop_unknown_face"] == 1
    for bad in (b"", b"\x05", b"\x05\x02\x07\x00", b"\x06\x00", interest("/a")[:-1]):
        net.interest(1, bad)
    assert net.counters["fw.drop_malformed_interest"] == 5
    assert net.sent() == {}


def test_app_params_interest_forwarded_unchanged() -> None:
    net = Net()
    net.route("/f", 3)
    wire = make_interest(from_uri("/f/call"), nonce=nonce(1), app_params=b"args")
    net.interest(1, wire)
    assert net.faces[3].sent == [("interest", wire, None, None)]


def test_next_hop_face_id_still_obeys_outgoing_rules() -> None:
    net = Net(local=(1,))
    net.interest(1, interest("/a", 1), next_hop_face_id=1)  # back to the sender: refused
    assert net.sent() == {}
    assert net.counters["fw.drop_out_to_ingress"] == 1
    net.interest(1, interest("/b", 2, hop_limit=1), next_hop_face_id=3)  # last hop, non-local
    assert net.sent() == {}
    assert net.counters["fw.drop_out_scope"] == 1
