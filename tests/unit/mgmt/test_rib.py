import time
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forwarder.mgmt.rib import (
    ORIGIN_APP,
    ORIGIN_STATIC,
    ROUTE_CAPTURE,
    ROUTE_CHILD_INHERIT,
    Rib,
    Route,
)
from forwarder.table.fib import Fib
from icn.errors import DecodeError
from icn.wire.name import component_ends, from_uri, is_prefix


def n(uri: str) -> bytes:
    return from_uri(uri)


def hops(fib: Fib, uri: str) -> dict[int, int] | None:
    """face -> cost of the FIB entry of exactly ``uri``, or None when there is no entry."""
    entry = fib.get(n(uri))
    return None if entry is None else {nh.face_id: nh.cost for nh in entry.nexthops}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(
    max_routes: int = 100_000, clock: Callable[[], float] = time.monotonic
) -> tuple[Rib, Fib, Counter[str]]:
    counters: Counter[str] = Counter()
    fib = Fib(counters=counters)
    return Rib(fib, max_routes=max_routes, clock=clock, counters=counters), fib, counters


def test_register_installs_nexthop_and_unregister_removes_entry() -> None:
    rib, fib, counters = make()
    assert rib.register(n("/a"), Route(face_id=3, cost=7))
    assert hops(fib, "/a") == {3: 7}
    assert (len(rib), rib.route_count) == (1, 1)
    assert rib.routes(n("/a")) == [Route(3, ORIGIN_APP, 7, ROUTE_CHILD_INHERIT, None)]
    assert not rib.unregister(n("/a"), 3, ORIGIN_STATIC)  # wrong origin
    assert not rib.unregister(n("/b"), 3, ORIGIN_APP)
    assert rib.unregister(n("/a"), 3, ORIGIN_APP)
    assert hops(fib, "/a") is None
    assert (len(rib), rib.route_count, len(fib)) == (0, 0, 0)
    assert (counters["rib.register"], counters["rib.unregister"]) == (1, 1)


def test_same_face_and_origin_replaces_the_route() -> None:
    rib, fib, _ = make()
    rib.register(n("/a"), Route(3, cost=7))
    rib.register(n("/a"), Route(3, cost=2, flags=ROUTE_CAPTURE))
    assert rib.route_count == 1
    assert rib.routes(n("/a")) == [Route(3, ORIGIN_APP, 2, ROUTE_CAPTURE)]
    assert hops(fib, "/a") == {3: 2}


def test_two_origins_on_one_face_give_the_lowest_cost() -> None:
    rib, fib, _ = make()
    rib.register(n("/a"), Route(3, ORIGIN_APP, cost=10))
    rib.register(n("/a"), Route(3, ORIGIN_STATIC, cost=4))
    assert rib.route_count == 2
    assert hops(fib, "/a") == {3: 4}
    rib.unregister(n("/a"), 3, ORIGIN_STATIC)
    assert hops(fib, "/a") == {3: 10}


def test_child_inherit_reaches_rib_descendants_only() -> None:
    rib, fib, _ = make()
    rib.register(n("/a/b"), Route(2))
    rib.register(n("/a"), Route(1, cost=5))  # registered after the child: the child is updated
    assert hops(fib, "/a") == {1: 5}
    assert hops(fib, "/a/b") == {1: 5, 2: 0}
    assert hops(fib, "/a/b/c") is None  # not in the RIB: longest-prefix match reaches /a/b
    rib.register(n("/a/b"), Route(1, ORIGIN_STATIC, cost=3))  # own route cheaper than inherited
    assert hops(fib, "/a/b") == {1: 3, 2: 0}


def test_no_inheritance_without_the_flag() -> None:
    rib, fib, _ = make()
    rib.register(n("/a"), Route(1, flags=0))
    rib.register(n("/a/b"), Route(2))
    assert hops(fib, "/a") == {1: 0}
    assert hops(fib, "/a/b") == {2: 0}
    rib.register(n("/a"), Route(1, flags=ROUTE_CHILD_INHERIT))
    assert hops(fib, "/a/b") == {1: 0, 2: 0}


@pytest.mark.parametrize(
    ("capture_flags", "grandchild"),
    [(ROUTE_CAPTURE, {3: 0}), (ROUTE_CAPTURE | ROUTE_CHILD_INHERIT, {3: 0, 2: 0})],
)
def test_capture_blocks_ancestors_but_its_own_routes_count(
    capture_flags: int, grandchild: dict[int, int]
) -> None:
    rib, fib, _ = make()
    rib.register(b"", Route(9))
    rib.register(n("/a"), Route(1))
    rib.register(n("/a/b/c"), Route(3))
    assert hops(fib, "/a/b/c") == {3: 0, 1: 0, 9: 0}
    rib.register(n("/a/b"), Route(2, flags=capture_flags))
    assert hops(fib, "/a/b") == {2: 0}
    assert hops(fib, "/a/b/c") == grandchild
    assert hops(fib, "/a") == {1: 0, 9: 0}
    rib.unregister(n("/a/b"), 2, ORIGIN_APP)  # capture gone: inheritance comes back
    assert hops(fib, "/a/b/c") == {3: 0, 1: 0, 9: 0}


def test_root_prefix() -> None:
    rib, fib, _ = make()
    assert rib.register(b"", Route(1, cost=4))
    rib.register(n("/x"), Route(2))
    assert hops(fib, "/") == {1: 4}
    assert hops(fib, "/x") == {1: 4, 2: 0}
    name = n("/y/z")
    entry = fib.longest_prefix_match(name, component_ends(name))
    assert entry is not None and entry.prefix == b""
    assert [p for p, _ in rib] == [b"", n("/x")]
    rib.unregister(b"", 1, ORIGIN_APP)
    assert (hops(fib, "/"), hops(fib, "/x")) == (None, {2: 0})


def test_unregistering_a_parent_updates_all_descendants() -> None:
    rib, fib, _ = make()
    rib.register(n("/a"), Route(1))
    for uri, face in (("/a/b", 2), ("/a/b/c", 3), ("/a/d", 4), ("/b", 5)):
        rib.register(n(uri), Route(face))
    rib.unregister(n("/a"), 1, ORIGIN_APP)
    assert hops(fib, "/a") is None
    assert hops(fib, "/a/b") == {2: 0}
    assert hops(fib, "/a/b/c") == {2: 0, 3: 0}
    assert hops(fib, "/a/d") == {4: 0}
    assert hops(fib, "/b") == {5: 0}


def test_remove_face_drops_its_routes_even_if_the_fib_already_did() -> None:
    rib, fib, counters = make()
    rib.register(n("/a"), Route(1))
    rib.register(n("/a"), Route(1, ORIGIN_STATIC))
    rib.register(n("/a/b"), Route(2))
    rib.register(n("/c"), Route(1))
    rib.register(n("/c"), Route(3))
    fib.remove_face(1)  # the forwarder goes first
    assert rib.remove_face(1) == 3
    assert rib.remove_face(1) == 0
    assert counters["rib.face_removed_routes"] == 3
    assert [p for p, _ in rib] == [n("/a/b"), n("/c")]
    assert rib.route_count == 2
    assert (hops(fib, "/a"), hops(fib, "/a/b"), hops(fib, "/c")) == (None, {2: 0}, {3: 0})


def test_nested_prefixes_leaving_the_rib_together_lose_their_fib_entries() -> None:
    clock = FakeClock()
    rib, fib, _ = make(clock=clock)
    for uri, child in (("/", "/x"), ("/a", "/a/x"), ("/a/b", "/a/b/x")):
        rib.register(n(uri), Route(1, expires_at=110.0))
        rib.register(n(child), Route(2))
    rib.register(n("/a/b/x"), Route(1, ORIGIN_STATIC))
    assert rib.expire(now=110.0) == 3
    assert [p for p, _ in rib] == [n("/a/b/x"), n("/a/x"), n("/x")]
    assert (len(fib), hops(fib, "/a/b"), hops(fib, "/a/b/x")) == (3, None, {1: 0, 2: 0})
    assert rib.remove_face(2) == 3 and rib.remove_face(1) == 1
    assert len(fib) == 0


def test_expiry_with_a_fake_clock() -> None:
    clock = FakeClock()
    rib, fib, counters = make(clock=clock)
    assert rib.next_expiry() is None
    rib.register(n("/a"), Route(1, expires_at=110.0))
    rib.register(n("/a"), Route(2, expires_at=105.0))
    rib.register(n("/b"), Route(3))  # never expires
    assert rib.next_expiry() == 105.0
    rib.register(n("/a"), Route(2, expires_at=120.0))  # refreshed: the old time is stale
    clock.now = 109.9
    assert rib.expire() == 0  # the stale 105 does not take the refreshed route
    assert rib.next_expiry() == 110.0
    clock.now = 110.0
    assert rib.expire() == 1
    assert hops(fib, "/a") == {2: 0}
    assert rib.next_expiry() == 120.0
    assert rib.expire(now=500.0) == 1
    assert (hops(fib, "/a"), hops(fib, "/b")) == (None, {3: 0})
    assert rib.next_expiry() is None
    assert counters["rib.expired"] == 2
    rib.register(n("/b"), Route(3, expires_at=130.0))
    rib.register(n("/b"), Route(3))  # made permanent again: nothing left to expire
    assert rib.next_expiry() is None
    assert rib.expire(now=1e9) == 0


def test_frequent_refreshes_keep_the_expiry_queue_bounded() -> None:
    rib, _, _ = make()
    rib.register(n("/a"), Route(1, expires_at=1000.0))
    for i in range(500):  # an app refreshing its registration often
        rib.register(n("/b"), Route(2, expires_at=2000.0 + i))
    assert len(rib._heap) <= 2 * rib.route_count + 64  # stale items are compacted away
    assert rib.next_expiry() == 1000.0
    assert rib.expire(now=2498.0) == 1
    assert rib.next_expiry() == 2499.0


def test_max_routes_bound() -> None:
    rib, fib, counters = make(max_routes=2)
    assert rib.register(n("/a"), Route(1))
    assert rib.register(n("/b"), Route(1))
    assert not rib.register(n("/c"), Route(1))
    assert not rib.register(n("/a"), Route(2))
    assert counters["rib.refused_full"] == 2
    assert (rib.route_count, hops(fib, "/c")) == (2, None)
    assert rib.register(n("/a"), Route(1, cost=9))  # replacing is not a new route
    assert hops(fib, "/a") == {1: 9}
    rib.unregister(n("/b"), 1, ORIGIN_APP)
    assert rib.register(n("/c"), Route(1))


def test_a_full_fib_refuses_the_registration() -> None:
    counters: Counter[str] = Counter()
    fib = Fib(max_entries=1, counters=counters)
    rib = Rib(fib, counters=counters)
    assert rib.register(n("/a"), Route(1))
    assert not rib.register(n("/a/b"), Route(2))
    assert counters["rib.refused_full"] == 1 and counters["fib.refused_full"] == 1
    assert (rib.routes(n("/a/b")), len(rib), rib.route_count) == ([], 1, 1)
    assert rib.register(n("/a"), Route(2))  # the prefix already has a FIB entry
    assert hops(fib, "/a") == {1: 0, 2: 0}


def test_routes_are_copies_and_iteration_is_sorted() -> None:
    rib, fib, _ = make()
    route = Route(5, cost=1)
    for uri in ("/b", "/a/b", "/a", "/"):
        rib.register(n(uri), route)
    route.cost = 99  # the caller's object is not the RIB's
    rib.routes(n("/a"))[0].cost = 99
    assert [p for p, _ in rib] == sorted([b"", n("/a"), n("/a/b"), n("/b")])
    assert all(rs == [Route(5, cost=1)] for _, rs in rib)
    assert hops(fib, "/a") == {5: 1}


def test_malformed_prefix_is_rejected() -> None:
    rib, _, _ = make()
    with pytest.raises(DecodeError):
        rib.register(b"\x08\x05ab", Route(1))
    assert len(rib) == 0


# -- property: the FIB is always what the routes imply -------------------------------------------

UNIVERSE = [n(u) for u in ("/", "/a", "/a/b", "/a/b/c", "/a/c", "/b", "/b/a")]
FACES = st.integers(1, 3)
ORIGINS = st.sampled_from([ORIGIN_APP, ORIGIN_STATIC])
PREFIXES = st.sampled_from(UNIVERSE)
OPS = st.one_of(
    st.tuples(
        st.just("register"),
        PREFIXES,
        FACES,
        ORIGINS,
        st.integers(0, 3),
        st.integers(0, 3),
        st.none() | st.integers(1, 4),
    ),
    st.tuples(st.just("unregister"), PREFIXES, FACES, ORIGINS),
    st.tuples(st.just("remove_face"), FACES, st.booleans()),
    st.tuples(st.just("tick"), st.integers(1, 3)),
)

Model = dict[tuple[bytes, int, int], tuple[int, int, float | None]]


def brute_force_fib(model: Model) -> dict[bytes, dict[int, int]]:
    """The next hops each RIB prefix should get, computed straight from the definition."""
    by_prefix: dict[bytes, list[tuple[int, int, int]]] = {}
    for (p, face, _), (cost, flags, _) in model.items():
        by_prefix.setdefault(p, []).append((face, cost, flags))
    out: dict[bytes, dict[int, int]] = {}
    for p in by_prefix:
        found: dict[int, int] = {}
        for a in sorted((a for a in by_prefix if is_prefix(a, p)), key=len, reverse=True):
            for face, cost, flags in by_prefix[a]:
                if a == p or flags & ROUTE_CHILD_INHERIT:
                    found[face] = min(cost, found.get(face, cost))
            if any(flags & ROUTE_CAPTURE for _, _, flags in by_prefix[a]):
                break
        out[p] = found
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_fib_matches_brute_force_recomputation(ops: list[tuple[object, ...]]) -> None:
    clock = FakeClock()
    fib = Fib()
    rib = Rib(fib, clock=clock)
    model: Model = {}
    for op in ops:
        match op:
            case (
                "register",
                bytes(p),
                int(face),
                int(origin),
                int(cost),
                int(flags),
                None | int() as ttl,
            ):
                expires = None if ttl is None else clock.now + ttl
                assert rib.register(p, Route(face, origin, cost, flags, expires))
                model[(p, face, origin)] = (cost, flags, expires)
            case ("unregister", bytes(p), int(face), int(origin)):
                assert rib.unregister(p, face, origin) == ((p, face, origin) in model)
                model.pop((p, face, origin), None)
            case ("remove_face", int(face), bool(fib_first)):
                if fib_first:
                    fib.remove_face(face)
                gone = [k for k in model if k[1] == face]
                assert rib.remove_face(face) == len(gone)
                for k in gone:
                    del model[k]
            case ("tick", int(dt)):
                clock.now += dt
                gone = [k for k, (_, _, e) in model.items() if e is not None and e <= clock.now]
                assert rib.expire() == len(gone)
                for k in gone:
                    del model[k]
            case _:
                pytest.fail(f"unmatched op {op!r}")
        expected = brute_force_fib(model)
        assert {e.prefix: {nh.face_id: nh.cost for nh in e.nexthops} for e in fib} == expected
        listed = {
            (p, r.face_id, r.origin): (r.cost, r.flags, r.expires_at) for p, rs in rib for r in rs
        }
        assert listed == model
        assert (len(rib), rib.route_count) == (len(expected), len(model))
        expiries = [e for _, _, e in model.values() if e is not None]
        assert rib.next_expiry() == (min(expiries) if expiries else None)
