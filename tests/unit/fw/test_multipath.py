"""The multipath strategy: names spread evenly over equal-cost next hops, the same name always
to the same hop (from any downstream, retransmitted or not), consecutive chunks round-robin,
fail-over on Nack, and one hop behaves like best-route; with the fake clock and faces.

Face 1 and 2 are consumers; 3, 4 (and 5, 6) are upstreams announcing /a.
"""

from __future__ import annotations

from collections import Counter

import pytest

from forwarder.fw.multipath import MultipathStrategy, component_number, spread_key
from forwarder.fw.strategy_registry import canonical_name, parse
from icn.errors import ConfigError
from icn.wire import tlv_types as T
from icn.wire.name import component_ends, from_uri, generic, segment

from .fakes import Net, data, interest

MULTIPATH = "/localhost/nfd/strategy/multipath/v=1"
A = from_uri("/a")


def mp_net(params: str = "", hops: tuple[int, ...] = (3, 4), n_faces: int = 6) -> Net:
    net = Net(n_faces=n_faces)
    for f in hops:
        net.route("/a", f)
    net.fw.set_strategy(A, MULTIPATH + params)
    return net


def where(net: Net) -> list[int]:
    """The faces an Interest went out on since the last clear; clears."""
    went = [f for f, face in net.faces.items() for _ in face.of("interest")]
    net.clear()
    return went


def test_names_spread_evenly_over_equal_cost_hops_and_never_to_a_costlier_one() -> None:
    net = mp_net(hops=(3, 4, 5))
    net.route("/a", 6, cost=10)
    per_hop: Counter[int] = Counter()
    for i in range(3000):
        net.interest(1, interest(f"/a/file{i}/data", i))
        went = where(net)
        assert len(went) == 1
        per_hop[went[0]] += 1
    assert set(per_hop) == {3, 4, 5}
    # a fair three-way split: 1000 each, 3 standard deviations of a binomial about +-77
    assert all(900 <= count <= 1100 for count in per_hop.values()), per_hop


def test_consecutive_chunks_go_round_robin() -> None:
    net = mp_net()
    went = []
    for chunk in range(64):
        net.interest(1, interest(f"/a/sum/7/{chunk}", chunk))
        went += where(net)
    assert went[0::2] == [went[0]] * 32 and went[1::2] == [went[1]] * 32
    assert {went[0], went[1]} == {3, 4}


def test_the_same_name_takes_the_same_hop_from_every_downstream_and_meets_in_the_pit() -> None:
    net = mp_net()
    chosen = {}
    for i in range(20):
        net.interest(1, interest(f"/a/x{i}", 100 + i))
        chosen[i] = where(net)
    # a second forwarder with the same routes chooses alike, from another downstream
    other = mp_net()
    for i in range(20):
        other.interest(2, interest(f"/a/x{i}", 200 + i))
        assert where(other) == chosen[i]
    # a second consumer's Interest for a pending name aggregates: nothing more goes up
    net.interest(2, interest("/a/x5", 999))
    assert where(net) == []
    entry = next(e for e in net.fw.pit if e.name == from_uri("/a/x5"))
    assert sorted(entry.in_records) == [1, 2]
    net.data(chosen[5][0], data("/a/x5"))
    assert [len(net.faces[f].of("data")) for f in (1, 2)] == [1, 1]


def test_a_retransmission_goes_to_the_same_hop() -> None:
    net = mp_net()
    net.interest(1, interest("/a/sum/1/0", 1))
    first = where(net)
    net.clock.advance(0.020)  # past the 10 ms suppression: allowed
    net.interest(1, interest("/a/sum/1/0", 2))
    assert where(net) == first
    net.clock.advance(0.001)
    net.interest(1, interest("/a/sum/1/0", 3))  # too soon: suppressed
    assert where(net) == []
    assert net.counters["fw.retx_suppressed"] == 1
    net.clock.advance(0.100)
    net.interest(2, interest("/a/sum/1/0", 4))  # another consumer: aggregated, whenever
    assert where(net) == []
    assert net.counters["fw.joined_pending"] == 1


def test_a_nack_fails_over_to_the_other_equal_cost_hop_then_the_costlier_one() -> None:
    net = mp_net()
    net.route("/a", 5, cost=10)
    w = interest("/a/sum/1/0", 1)
    net.interest(1, w)
    (first,) = where(net)
    second = 7 - first  # the other of 3 and 4
    net.nack(first, w, T.NACK_NO_ROUTE)
    assert where(net) == [second]
    net.nack(second, w, T.NACK_CONGESTION)
    assert where(net) == [5]
    assert net.counters["fw.multipath_failover"] == 2
    assert net.faces[1].of("nack") == []
    net.nack(5, w, T.NACK_NO_ROUTE)
    # every hop Nacked: the consumer gets the least severe reason, and the entry ends
    assert [s[3] for s in net.faces[1].of("nack")] == [T.NACK_CONGESTION]
    net.fw.tick()
    assert len(net.fw.pit) == 0


def test_a_retransmission_avoids_the_hop_that_nacked_it() -> None:
    net = mp_net()
    w = interest("/a/sum/1/0", 1)
    net.interest(1, w)
    (first,) = where(net)
    net.interest(2, interest("/a/sum/1/0", 2, lifetime=4000))  # keeps the entry waiting
    net.clear()
    net.nack(first, w, T.NACK_CONGESTION)
    (second,) = where(net)
    assert second != first
    net.clock.advance(0.020)
    net.interest(1, interest("/a/sum/1/0", 3))
    assert where(net) == [second]


def test_the_chosen_hop_is_skipped_when_it_is_the_ingress() -> None:
    net = mp_net(hops=(1, 3))  # face 1 is both a next hop and the consumer
    chosen = Counter()
    for i in range(40):
        net.interest(1, interest(f"/a/sum/1/{i}", i))
        chosen.update(where(net))
    assert chosen == {3: 40}


def test_a_single_hop_takes_everything_and_no_route_nacks() -> None:
    net = mp_net(hops=(3,))
    for i in range(10):
        net.interest(1, interest(f"/a/y{i}", i))
        assert where(net) == [3]
    net.interest(1, interest("/b", 50))
    assert [s[3] for s in net.faces[1].of("nack")] == [T.NACK_NO_ROUTE]
    assert net.counters["fw.nack_no_route"] == 1


def test_components_parameter_hashes_only_the_last_ones() -> None:
    # with components~2, /a/job1/sum/3/17 and /a/job2/sum/3/17 share a key: the same hop
    names = [from_uri(f"/a/job{j}/sum/3/17") for j in range(10)]
    keys = {spread_key(n, component_ends(n), 2) for n in names}
    assert len(keys) == 1
    whole = {spread_key(n, component_ends(n), None) for n in names}
    assert len(whole) == 10
    # the number is added to the hash of the components before it: neighbours differ by one
    n16, n17 = from_uri("/a/sum/3/16"), from_uri("/a/sum/3/17")
    assert spread_key(n17, component_ends(n17), 2) == spread_key(n16, component_ends(n16), 2) + 1
    net = mp_net("/components~1")
    assert strategy(net).components == 1


def strategy(net: Net) -> MultipathStrategy:
    s = net.fw.strategy_choice.get(A)
    assert isinstance(s, MultipathStrategy)
    return s


def test_numbers_in_components() -> None:
    assert component_number(generic("17")) == 17
    assert component_number(segment(300)) == 300
    assert component_number(generic("x7")) is None
    assert component_number(generic("")) is None
    assert component_number(generic("1" * 19)) is None


def test_parameters_are_checked_and_named() -> None:
    assert canonical_name(MULTIPATH + "/components~02") == MULTIPATH + "/components~2"
    assert canonical_name("multipath") == MULTIPATH
    for bad, message in (
        ("/spread~2", "has no parameter 'spread'"),
        ("/components~0", "integer in 1..64"),
        ("/components~x", "integer in 1..64"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse(MULTIPATH + bad)
