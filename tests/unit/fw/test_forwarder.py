"""Forwarder bookkeeping: expiry (tick), face removal, counters."""

from __future__ import annotations

from icn.wire.name import from_uri

from .fakes import Net, data, interest, nonce


def test_expiry_finalizes_unsatisfied_entry_and_fills_dnl() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1, lifetime=1000))
    net.clock.advance(0.9)
    net.fw.tick()
    assert len(net.fw.pit) == 1
    net.clock.advance(0.2)
    net.clear()
    net.fw.tick()
    assert len(net.fw.pit) == 0
    assert net.sent() == {}  # no Nack on expiry
    assert net.counters["fw.interest_unsatisfied"] == 1
    assert net.fw.dnl.has(from_uri("/a"), nonce(1), net.clock.t)


def test_late_data_after_expiry_is_unsolicited() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1, lifetime=100))
    net.clock.advance(0.2)
    net.fw.tick()
    net.data(3, data("/a"))
    assert net.faces[1].sent == []
    assert net.counters["fw.drop_unsolicited_data"] == 1


def test_remove_face_cleans_pit_and_fib() -> None:
    net = Net(n_faces=5)
    net.route("/a", 3)
    net.route("/a", 4, cost=5)
    net.route("/b", 3)
    net.interest(1, interest("/a", 1))
    net.interest(2, interest("/a", 2))
    net.fw.remove_face(3)
    assert 3 not in net.fw.faces
    assert from_uri("/b") not in {e.prefix for e in net.fw.fib}
    fib_entry = net.fw.fib.get(from_uri("/a"))
    assert fib_entry is not None and [nh.face_id for nh in fib_entry.nexthops] == [4]
    entry = next(iter(net.fw.pit))
    assert 3 not in entry.out_records
    net.fw.remove_face(1)
    net.fw.remove_face(2)
    assert len(net.fw.pit) == 0  # no downstream left
    net.interest(1, interest("/a", 3))  # a removed face's packets are dropped
    assert net.counters["fw.drop_unknown_face"] == 1


def test_removed_downstream_gets_no_data() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1))
    net.interest(2, interest("/a", 2))
    face1 = net.faces[1]
    net.fw.remove_face(1)
    net.data(3, data("/a"))
    assert face1.sent == []
    assert net.faces[2].of("data")


def test_counters_shared_with_tables() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a"))
    assert net.counters["pit.insert"] == 1
    assert net.counters["fib.insert"] == 1
