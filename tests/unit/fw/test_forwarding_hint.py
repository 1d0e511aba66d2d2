"""ForwardingHint: a route found by the hint's names, as NFD's lookupFib outside the producer's
region; the Interest's own name still decides the content store and the PIT."""

from __future__ import annotations

import pytest

from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri
from icn.wire.packet import hint_names, parse_interest
from icn.wire.tlv import encode_tlv

from .fakes import Net, nonce


def hinted(uri: str, *hints: str, n: int = 1) -> bytes:
    return make_interest(
        from_uri(uri), nonce=nonce(n), forwarding_hint=[from_uri(h) for h in hints]
    )


@pytest.mark.parametrize("strategy", ["best-route", "asf", "multicast"])
def test_the_hint_routes_a_name_that_has_no_route_of_its_own(strategy: str) -> None:
    net = Net(n_faces=5, default_strategy=strategy)
    net.route("/cfn/node/b", 4)
    net.route("/cfn/node/a", 3)
    net.interest(1, hinted("/cfn/obj/d1", "/cfn/node/b"))
    assert list(net.sent()) == [4]
    assert net.counters["fw.nack_no_route"] == 0


def test_the_first_hint_with_a_route_wins_and_the_default_route_does_not_count() -> None:
    net = Net(n_faces=5)
    net.route("/", 5)  # a default route matches every hint: it must not shadow a later one
    net.route("/cfn/node/b", 4)
    net.interest(1, hinted("/cfn/obj/d1", "/cfn/node/gone", "/cfn/node/b"))
    assert list(net.sent()) == [4]


def test_a_hint_without_a_route_falls_back_to_the_name() -> None:
    net = Net(n_faces=5)
    net.route("/cfn/obj", 3)
    net.interest(1, hinted("/cfn/obj/d1", "/cfn/node/gone"))
    assert list(net.sent()) == [3]
    net2 = Net(n_faces=5)
    net2.interest(1, hinted("/cfn/obj/d1", "/cfn/node/gone"))
    assert net2.counters["fw.nack_no_route"] == 1


def test_without_a_hint_the_name_alone_routes() -> None:
    net = Net(n_faces=5)
    net.route("/cfn/node/b", 4)
    net.interest(1, make_interest(from_uri("/cfn/obj/d1"), nonce=nonce(1)))
    assert not net.faces[4].sent
    assert net.counters["fw.nack_no_route"] == 1


def test_an_unhinted_interest_joins_a_hinted_one_and_both_get_the_data() -> None:
    """A second caller that knows the result's name but not where it lives asks without a
    hint: it waits on the first caller's pending Interest, then gets the cached copy."""
    net = Net(n_faces=5)
    net.route("/cfn/node/b", 4)
    net.interest(1, hinted("/cfn/obj/d1", "/cfn/node/b", n=1))
    net.interest(2, make_interest(from_uri("/cfn/obj/d1"), nonce=nonce(2)))
    assert len(net.faces[4].sent) == 1  # aggregated, not forwarded again
    net.data(4, make_data(from_uri("/cfn/obj/d1"), b"42"))
    assert net.faces[1].of("data") and net.faces[2].of("data")
    net.interest(3, make_interest(from_uri("/cfn/obj/d1"), nonce=nonce(3)))
    assert net.faces[3].of("data")  # from the content store, no route needed
    assert len(net.faces[4].sent) == 1


def test_hint_names_reads_names_and_legacy_delegations() -> None:
    a, b = from_uri("/x/a"), from_uri("/y")
    assert hint_names(encode_tlv(7, a) + encode_tlv(7, b)) == [a, b]
    legacy = encode_tlv(31, encode_tlv(30, b"\x01") + encode_tlv(7, b))
    assert hint_names(legacy + encode_tlv(7, a)) == [b, a]
    wire = hinted("/n", "/x/a", "/y")
    iv = parse_interest(wire)
    assert iv.forwarding_hint is not None and hint_names(iv.forwarding_hint) == [a, b]
