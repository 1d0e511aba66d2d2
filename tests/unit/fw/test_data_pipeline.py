"""Incoming Data pipeline: matching, delivery with PitTokens, caching, DNL, scope."""

from __future__ import annotations

from icn.wire import tlv_types as T
from icn.wire.encode import make_interest
from icn.wire.name import from_uri, implicit_digest_component

from .fakes import Net, data, interest, nonce

TOKEN1 = b"\x01"
TOKEN2 = b"\x02\x02"


def test_unsolicited_data_dropped_and_not_cached() -> None:
    net = Net()
    net.data(3, data("/a/b"))
    assert net.sent() == {}
    assert net.counters["fw.drop_unsolicited_data"] == 1
    assert len(net.fw.cs) == 0


def test_data_for_other_name_is_unsolicited() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/b"))
    net.data(3, data("/a/b/c"))  # /a/b without CanBePrefix wants exactly /a/b
    assert net.faces[1].sent == []
    assert net.counters["fw.drop_unsolicited_data"] == 1
    assert len(net.fw.pit) == 1


def test_data_delivered_with_each_pit_token_and_congestion_mark() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1), pit_token=TOKEN1)
    net.interest(2, interest("/a", 2), pit_token=TOKEN2)
    net.interest(4, interest("/a", 3))
    d = data("/a")
    net.data(3, d, congestion_mark=1)
    assert net.faces[1].sent == [("data", d, TOKEN1, 1)]
    assert net.faces[2].sent == [("data", d, TOKEN2, 1)]
    assert net.faces[4].sent == [("data", d, None, 1)]
    assert net.counters["fw.out_data"] == 3


def test_data_cached_unless_no_cache_policy() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/1", 1))
    net.data(3, data("/a/1"), cache_policy=T.CACHE_POLICY_NO_CACHE)
    assert len(net.fw.cs) == 0
    assert net.faces[1].of("data")  # still delivered
    net.interest(1, interest("/a/2", 2))
    net.data(3, data("/a/2"))
    assert len(net.fw.cs) == 1


def test_cs_admit_off_does_not_cache() -> None:
    net = Net()
    net.route("/a", 3)
    net.fw.cs.admit = False
    net.interest(1, interest("/a"))
    net.data(3, data("/a"))
    assert len(net.fw.cs) == 0 and net.faces[1].of("data")


def test_can_be_prefix_interest_satisfied_by_longer_name() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1, cbp=True))
    d = data("/a/b/c")
    net.data(3, d)
    assert net.faces[1].sent == [("data", d, None, 0)]
    assert len(net.fw.pit) == 0


def test_several_matching_entries_one_copy_per_downstream() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1, cbp=True), pit_token=TOKEN1)
    net.interest(1, interest("/a/b", 2), pit_token=b"\x09")  # same downstream, second entry
    net.interest(2, interest("/a/b", 3, mbf=True), pit_token=TOKEN2)
    assert len(net.fw.pit) == 3
    d = data("/a/b")
    net.data(3, d)
    assert len(net.faces[1].of("data")) == 1
    assert net.faces[2].sent == [("data", d, TOKEN2, 0)]
    assert len(net.fw.pit) == 0
    assert net.counters["fw.interest_satisfied"] == 3


def test_implicit_digest_interest_satisfied() -> None:
    net = Net()
    net.route("/a", 3)
    d = data("/a/b", b"exact")
    full = from_uri("/a/b") + implicit_digest_component(d)
    net.interest(1, make_interest(full, nonce=nonce(1)))
    assert len(net.faces[3].of("interest")) == 1
    other = data("/a/b", b"another")
    net.data(3, other)  # same name, wrong digest
    assert net.faces[1].sent == []
    net.data(3, d)
    assert net.faces[1].sent == [("data", d, None, 0)]


def test_data_not_sent_back_to_ingress_nor_to_expired_downstream() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1, lifetime=100))
    net.interest(2, interest("/a", 2, lifetime=4000))
    net.interest(3, interest("/a", 3))  # the upstream asked too
    net.clock.advance(0.5)  # face 1's Interest has expired, face 2's has not
    d = data("/a")
    net.clear()
    net.data(3, d)
    assert net.sent() == {2: [("data", d, None, 0)]}


def test_localhost_data_scope() -> None:
    net = Net(local=(1, 2))
    net.route("/localhost/x", 2)
    net.interest(1, interest("/localhost/x"))
    net.data(3, data("/localhost/x"))  # from a non-local face: dropped
    assert net.counters["fw.drop_scope"] == 1
    assert net.faces[1].sent == []
    net.data(2, data("/localhost/x"))
    assert net.faces[1].of("data")


def test_satisfied_must_be_fresh_short_freshness_fills_dnl() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a/1", 11, mbf=True))
    net.data(3, data("/a/1", freshness=1000))
    assert net.fw.dnl.has(from_uri("/a/1"), nonce(11), net.clock.t)
    # long freshness, or no MustBeFresh: the nonce is not kept
    net.interest(1, interest("/a/2", 12, mbf=True))
    net.data(3, data("/a/2", freshness=10_000))
    assert not net.fw.dnl.has(from_uri("/a/2"), nonce(12), net.clock.t)
    net.interest(1, interest("/a/3", 13))
    net.data(3, data("/a/3", freshness=10))
    assert not net.fw.dnl.has(from_uri("/a/3"), nonce(13), net.clock.t)


def test_malformed_data_counted_not_raised() -> None:
    net = Net()
    for bad in (b"", b"\x06", b"\x06\x03\x07\x01\x08", data("/a")[:-2], b"\x05\x00"):
        net.data(3, bad)
    assert net.counters["fw.drop_malformed_data"] == 5
    net.data(42, data("/a"))
    assert net.counters["fw.drop_unknown_face"] == 1
