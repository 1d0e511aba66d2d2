"""Reflexive forwarding in the pipelines (docs/design.md section 5).

Face 1 is the consumer's side (where Trigger Interests come from), face 2 the producer's (the
FIB route for /svc), face 3 a bystander.  Reflexive Interests come from face 2.
"""

from __future__ import annotations

import pytest

from forwarder.table.limits import TableLimits
from forwarder.table.pit import PitEntry
from icn.wire import tlv_types as T
from icn.wire.name import reflexive_component
from icn.wire.packet import parse_interest

from .fakes import Net, rdata, ri, tdata, ti

RNP = bytes(range(16))
OTHER = bytes(range(16, 32))
KEY = reflexive_component(RNP)


def svc_net(limits: TableLimits | None = None) -> Net:
    net = Net(limits=limits)
    net.route("/svc", 2)
    return net


def ti_entry(net: Net) -> PitEntry:
    state = net.fw.rft.find(KEY)
    assert state is not None
    return state.entry


def test_ti_installs_state_and_goes_upstream_by_fib() -> None:
    net = svc_net()
    wire = ti("/svc/fn", RNP)
    net.interest(1, wire)
    assert net.sent() == {2: [("interest", wire, None, None)]}
    entry = ti_entry(net)
    assert entry is next(iter(net.fw.pit))
    assert net.counters["rft.insert"] == 1


def test_ti_retransmission_keeps_one_state() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP, 1))
    net.clock.advance(0.5)
    net.interest(1, ti("/svc/fn", RNP, 2))
    assert len(net.fw.rft) == 1 and net.counters["rft.insert"] == 1


def test_ri_goes_only_to_ti_ingress_even_against_fib() -> None:
    net = svc_net()
    net.route("/", 3)
    assert net.fw.fib.add_nexthop(KEY, 3, 0)  # a route for the RNP itself, pointing elsewhere
    net.interest(1, ti("/svc/fn", RNP))
    net.clear()
    net.interest(2, ri(RNP, n=7, hop_limit=5))
    assert list(net.sent()) == [1]
    (sent,) = net.faces[1].interests()
    assert sent.name.startswith(KEY) and sent.hop_limit == 4
    assert net.counters["fw.reflexive_forwarded"] == 1
    ri_entry = net.fw.pit.find(parse_interest(ri(RNP)))
    assert ri_entry is not None and list(ri_entry.out_records) == [1]
    assert list(ri_entry.in_records) == [2]


def test_ri_forwarded_without_any_fib_route() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    net.clear()
    wire = ri(RNP)
    net.interest(2, wire)
    assert net.sent() == {1: [("interest", wire, None, None)]}
    assert net.counters["fw.nack_no_route"] == 0


def test_guessed_rnp_dropped_and_counted_before_any_table() -> None:
    net = svc_net()
    net.route("/", 3)
    net.interest(1, ti("/svc/fn", RNP))
    net.clear()
    before = dict(net.counters)
    net.interest(2, ri(OTHER))
    assert net.sent() == {}
    assert net.counters["fw.drop_reflexive_no_state"] == 1
    assert len(net.fw.pit) == 1 and len(net.fw.dnl) == 0
    for name in ("pit.insert", "cs.miss", "fw.out_nack", "fw.out_interest"):
        assert net.counters[name] == before.get(name, 0)


def test_ri_after_ti_expired_is_dropped() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP, lifetime=1000))
    net.clock.advance(1.1)
    net.fw.tick()
    assert len(net.fw.rft) == 0 and net.counters["rft.erase"] == 1
    net.clear()
    net.interest(2, ri(RNP))
    assert net.sent() == {}
    assert net.counters["fw.drop_reflexive_no_state"] == 1


def test_ri_after_ti_data_passed_is_dropped() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    td = tdata("/svc/fn", RNP)
    net.data(2, td)
    assert net.faces[1].of("data") == [("data", td, None, 0)]
    assert len(net.fw.rft) == 0
    net.clear()
    net.interest(2, ri(RNP))
    assert net.sent() == {}
    assert net.counters["fw.drop_reflexive_no_state"] == 1


def test_ri_after_ti_rejected_is_dropped() -> None:
    net = Net()  # no route: best-route Nacks the TI and rejects its entry
    net.interest(1, ti("/svc/fn", RNP))
    assert net.faces[1].kinds() == ["nack"]
    assert len(net.fw.rft) == 0
    net.interest(2, ri(RNP))
    assert net.counters["fw.drop_reflexive_no_state"] == 1


def test_ri_extends_ti_to_one_and_a_half_ri_lifetimes() -> None:
    net = svc_net()
    t0 = net.clock.t
    net.interest(1, ti("/svc/fn", RNP, lifetime=1000))
    entry = ti_entry(net)
    net.clock.advance(0.8)
    net.interest(2, ri(RNP, lifetime=2000))
    assert entry.expiry == pytest.approx(t0 + 0.8 + 3.0)
    net.clock.advance(1.2)  # past the TI's own lifetime
    net.fw.tick()
    assert net.fw.rft.find(KEY) is not None
    net.clock.advance(0.9)
    net.clear()
    td = tdata("/svc/fn", RNP)
    net.data(2, td)
    assert net.faces[1].of("data") == [("data", td, None, 0)]  # its in-record was extended too
    assert net.counters["fw.interest_satisfied"] == 1


def test_short_ri_never_shortens_the_ti() -> None:
    net = svc_net()
    t0 = net.clock.t
    net.interest(1, ti("/svc/fn", RNP, lifetime=10_000))
    entry = ti_entry(net)
    net.interest(2, ri(RNP, lifetime=100))
    assert entry.expiry == pytest.approx(t0 + 10.0)


def test_ti_expires_after_the_extension_runs_out() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP, lifetime=1000))
    net.interest(2, ri(RNP, lifetime=1000))
    net.clock.advance(1.6)
    net.fw.tick()
    assert len(net.fw.rft) == 0


def test_reflexive_data_cached_served_to_retransmission_and_purged_at_teardown() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    net.interest(2, ri(RNP, n=1))
    rd = rdata(RNP)
    net.data(1, rd)
    assert net.faces[2].of("data") == [("data", rd, None, 0)]
    state = net.fw.rft.find(KEY)
    assert state is not None and state.cached
    net.clear()
    # the producer missed it and asks again: answered here, not by the consumer
    net.interest(2, ri(RNP, n=2))
    assert net.sent() == {2: [("data", rd, None, 0)]}
    assert net.counters["fw.cs_hit"] == 1
    net.data(2, tdata("/svc/fn", RNP))
    assert net.fw.cs.lookup(parse_interest(ri(RNP, n=3)), net.clock.t) is None
    assert net.counters["cs.erased"] == 1
    assert len(net.fw.cs) == 1  # the Trigger Data only


def test_reflexive_data_without_live_state_forwarded_not_cached() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    net.interest(2, ri(RNP))
    net.data(2, tdata("/svc/fn", RNP))  # the producer answered the TI too early
    net.clear()
    rd = rdata(RNP)
    net.data(1, rd)
    assert net.sent() == {2: [("data", rd, None, 0)]}
    assert net.counters["fw.reflexive_data_not_cached"] == 1
    assert len(net.fw.cs) == 1  # the Trigger Data only


def test_full_table_nacks_ti_congestion_and_forwards_nothing() -> None:
    net = svc_net(TableLimits(reflexive_max_entries=1))
    net.interest(1, ti("/svc/fn", RNP, 1))
    net.clear()
    wire = ti("/svc/fn", OTHER, 2)
    net.interest(3, wire)
    assert net.sent() == {3: [("nack", wire, None, T.NACK_CONGESTION)]}
    assert len(net.fw.pit) == 1
    assert net.counters["fw.drop_reflexive_full"] == 1
    assert net.counters["rft.refused_full"] == 1
    # room again once the first exchange is over
    net.data(2, tdata("/svc/fn", RNP))
    net.clear()
    net.interest(3, ti("/svc/fn", OTHER, 3))
    assert [i.name for i in net.faces[2].interests()] == [parse_interest(wire).name]


def test_one_face_over_its_reflexive_share_is_nacked_another_is_not() -> None:
    net = svc_net(TableLimits(reflexive_max_entries=4, face_share=0.5))
    for i in range(3):
        net.interest(1, ti("/svc/fn", bytes([i]) * 16, i))
    assert [s[3] for s in net.faces[1].of("nack")] == [T.NACK_CONGESTION]
    assert net.counters["rft.refused_face_share"] == 1 and net.fw.refused_by_face == {1: 1}
    assert len(net.faces[2].of("interest")) == 2
    net.interest(3, ti("/svc/fn", OTHER, 9))
    assert len(net.faces[2].of("interest")) == 3 and not net.faces[3].sent


def test_tis_with_different_rnps_never_aggregate() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP, 1))
    net.interest(3, ti("/svc/fn", OTHER, 2))
    assert len(net.faces[2].of("interest")) == 2
    assert net.counters["fw.aggregated"] == 0 and len(net.fw.pit) == 2
    net.clear()
    net.interest(2, ri(RNP, n=3))
    net.interest(2, ri(OTHER, n=4))
    assert [i.name[: len(KEY)] for i in net.faces[1].interests()] == [KEY]
    assert [i.name[: len(KEY)] for i in net.faces[3].interests()] == [reflexive_component(OTHER)]


def test_second_ti_with_a_live_rnp_does_not_take_over_its_path() -> None:
    net = svc_net()
    net.route("/other", 2)
    net.interest(1, ti("/svc/fn", RNP, 1))
    net.interest(3, ti("/other", RNP, 2))  # same RNP, another name: forwarded, no new state
    assert len(net.faces[2].of("interest")) == 2
    assert net.counters["fw.reflexive_key_in_use"] == 1 and len(net.fw.rft) == 1
    net.clear()
    net.interest(2, ri(RNP))
    assert list(net.sent()) == [1]


def test_ri_with_only_its_ingress_waiting_is_dropped() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    net.clear()
    net.interest(1, ri(RNP))
    assert net.sent() == {}
    assert net.counters["fw.drop_reflexive_no_face"] == 1
    assert len(net.fw.pit) == 1  # the RI's own entry is not left behind


def test_ri_respects_hop_limit() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    net.interest(2, ri(RNP, hop_limit=1))  # its last hop: only local faces may take it
    assert net.counters["fw.drop_reflexive_no_face"] == 1
    assert net.faces[1].of("interest") == []


def test_face_removal_ends_state_and_purges_cached_data() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    net.interest(2, ri(RNP))
    net.data(1, rdata(RNP))
    assert len(net.fw.cs) == 1
    net.fw.remove_face(1)
    assert len(net.fw.rft) == 0 and len(net.fw.cs) == 0
    net.interest(2, ri(RNP, n=2))
    assert net.counters["fw.drop_reflexive_no_state"] == 1


def test_nack_for_ri_from_consumer_side_goes_back_to_producer() -> None:
    net = svc_net()
    net.interest(1, ti("/svc/fn", RNP))
    wire = ri(RNP, n=5)
    net.interest(2, wire)
    net.clear()
    net.nack(1, wire, T.NACK_NO_ROUTE)
    assert net.faces[2].of("nack") == [("nack", wire, None, T.NACK_NO_ROUTE)]
