"""Incoming Nack pipeline and the strategies' Nack processing."""

from __future__ import annotations

from icn.wire import tlv_types as T
from icn.wire.name import from_uri

from .fakes import Net, interest

TOKEN1 = b"\x01"
TOKEN2 = b"\x02\x02"


def _two_upstreams(strategy: str = "multicast") -> Net:
    net = Net(n_faces=5)
    net.route("/a", 3)
    net.route("/a", 4, cost=1)
    net.fw.set_strategy(from_uri("/a"), strategy)
    return net


def test_nack_sent_downstream_when_only_upstream_nacks() -> None:
    net = Net()
    net.route("/a", 3)
    w1 = interest("/a", 1)
    w2 = interest("/a", 2)
    net.interest(1, w1, pit_token=TOKEN1)
    net.interest(2, w2, pit_token=TOKEN2)
    net.clear()
    net.nack(3, w1, T.NACK_NO_ROUTE)
    # each downstream gets its own Interest back, with its own token
    assert net.sent() == {
        1: [("nack", w1, TOKEN1, T.NACK_NO_ROUTE)],
        2: [("nack", w2, TOKEN2, T.NACK_NO_ROUTE)],
    }
    assert len(net.fw.pit) == 0
    assert net.counters["fw.interest_unsatisfied"] == 1


def test_least_severe_reason_after_all_upstreams_nacked() -> None:
    net = _two_upstreams()
    w = interest("/a", 1)
    net.interest(1, w)
    assert len(net.faces[3].sent) == len(net.faces[4].sent) == 1
    net.clear()
    net.nack(4, w, T.NACK_NO_ROUTE)
    assert net.sent() == {}  # still waiting for face 3
    net.nack(3, w, T.NACK_CONGESTION)
    assert net.sent() == {1: [("nack", w, None, T.NACK_CONGESTION)]}
    assert len(net.fw.pit) == 0


def test_unknown_reason_is_most_severe() -> None:
    net = _two_upstreams()
    w = interest("/a", 1)
    net.interest(1, w)
    net.clear()
    net.nack(3, w, 77)
    net.nack(4, w, T.NACK_DUPLICATE)
    assert net.faces[1].sent == [("nack", w, None, T.NACK_DUPLICATE)]


def test_nack_with_wrong_nonce_dropped() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1))
    net.clear()
    net.nack(3, interest("/a", 999), T.NACK_NO_ROUTE)
    assert net.sent() == {}
    assert net.counters["fw.drop_nack_nonce"] == 1
    entry = next(iter(net.fw.pit))
    assert entry.out_records[3].nack_reason is None


def test_nack_from_face_without_out_record_dropped() -> None:
    net = Net()
    net.route("/a", 3)
    w = interest("/a", 1)
    net.interest(1, w)
    net.clear()
    net.nack(4, w, T.NACK_NO_ROUTE)
    assert net.sent() == {} and net.counters["fw.drop_nack_nonce"] == 1
    net.nack(3, interest("/zzz", 1), T.NACK_NO_ROUTE)
    assert net.counters["fw.drop_nack_no_pit"] == 1


def test_malformed_nack_counted_not_raised() -> None:
    net = Net()
    net.nack(3, b"\x05\x01", T.NACK_NO_ROUTE)
    net.nack(3, b"", T.NACK_NO_ROUTE)
    assert net.counters["fw.drop_malformed_nack"] == 2
    net.nack(77, interest("/a"), T.NACK_NO_ROUTE)
    assert net.counters["fw.drop_unknown_face"] == 1


def test_last_silent_upstream_that_is_also_downstream_gets_nack_at_once() -> None:
    """NFD: if the one upstream still pending is also a downstream, waiting is pointless."""
    net = Net(n_faces=5)
    net.route("/a", 3)
    net.route("/a", 4, cost=1)
    net.fw.set_strategy(from_uri("/a"), "multicast")
    w1 = interest("/a", 1)
    w3 = interest("/a", 3)
    net.interest(1, w1)  # out to 3 and 4
    net.interest(3, w3, pit_token=TOKEN2)  # 3 is now a downstream too
    net.clear()
    net.nack(4, w1, T.NACK_CONGESTION)
    assert net.sent() == {3: [("nack", w3, TOKEN2, T.NACK_CONGESTION)]}
    assert len(net.fw.pit) == 1  # face 1 still waits for face 3's answer


def test_best_route_nack_ends_entry_and_next_interest_is_new() -> None:
    net = _two_upstreams("best-route")
    w1 = interest("/a", 1)
    net.interest(1, w1)
    assert list(net.sent()) == [3]
    net.nack(3, w1, T.NACK_CONGESTION)
    assert net.faces[1].of("nack")  # single out-record, all Nacked: downstream told
    net.clear()
    # a fresh Interest after a Nack is a new Interest: goes to the cheapest again
    w2 = interest("/a", 2)
    net.interest(1, w2)
    assert list(net.sent()) == [3]


def test_nack_then_tick_finalizes_when_strategy_waits_on_expired_out_record() -> None:
    net = _two_upstreams()
    w = interest("/a", 1, lifetime=100)
    net.interest(1, w)
    net.interest(2, interest("/a", 2, lifetime=4000))  # keeps the entry alive
    net.clock.advance(0.2)  # the out-records (100 ms) have expired but are not Nacked
    net.clear()
    net.nack(3, w, T.NACK_NO_ROUTE)
    assert net.sent() == {}  # face 4 has not Nacked: the strategy waits
    net.fw.tick()
    assert len(net.fw.pit) == 0  # nothing could still come from upstream
    assert net.sent() == {}  # expiry sends no Nack
