from collections import Counter

import pytest

from forwarder.table.fib import Fib
from tests.unit.table.packets import ends, name


def lpm(fib: Fib, uri: str) -> bytes | None:
    n = name(uri)
    entry = fib.longest_prefix_match(n, ends(n))
    return None if entry is None else entry.prefix


def test_empty_fib_has_no_route() -> None:
    assert lpm(Fib(), "/a/b") is None


def test_lpm_picks_longest_present_prefix() -> None:
    fib = Fib()
    for uri in ("/a", "/a/b/c", "/x/y"):
        assert fib.add_nexthop(name(uri), 1)
    assert lpm(fib, "/a/b/c/d/e") == name("/a/b/c")
    assert lpm(fib, "/a/b/c") == name("/a/b/c")
    assert lpm(fib, "/a/b") == name("/a")
    assert lpm(fib, "/a/bc/d") == name("/a")
    assert lpm(fib, "/ab") is None
    assert lpm(fib, "/x") is None
    assert lpm(fib, "/x/y/z") == name("/x/y")


def test_root_prefix_matches_everything_but_loses_to_longer() -> None:
    fib = Fib()
    fib.add_nexthop(b"", 7)
    fib.add_nexthop(name("/a/b"), 8)
    assert lpm(fib, "/z") == b""
    assert lpm(fib, "/a") == b""
    assert lpm(fib, "/a/b/c") == name("/a/b")


def test_lpm_skips_depths_after_removal() -> None:
    fib = Fib()
    fib.add_nexthop(name("/a"), 1)
    fib.add_nexthop(name("/a/b/c"), 2)
    fib.remove_nexthop(name("/a/b/c"), 2)
    assert lpm(fib, "/a/b/c/d") == name("/a")
    fib.remove_nexthop(name("/a"), 1)
    assert lpm(fib, "/a/b/c/d") is None


def test_nexthops_sorted_by_cost_then_face_and_cost_updated() -> None:
    fib = Fib()
    p = name("/p")
    fib.add_nexthop(p, 5, cost=10)
    fib.add_nexthop(p, 3, cost=10)
    fib.add_nexthop(p, 9, cost=1)
    entry = fib.get(p)
    assert entry is not None
    assert [(nh.face_id, nh.cost) for nh in entry.nexthops] == [(9, 1), (3, 10), (5, 10)]
    fib.add_nexthop(p, 5, cost=0)  # update, not a duplicate
    assert [(nh.face_id, nh.cost) for nh in entry.nexthops] == [(5, 0), (9, 1), (3, 10)]


def test_remove_nexthop_deletes_entry_with_last_hop() -> None:
    fib = Fib()
    p = name("/p")
    fib.add_nexthop(p, 1)
    fib.add_nexthop(p, 2)
    assert fib.remove_nexthop(p, 1)
    assert not fib.remove_nexthop(p, 1)
    assert len(fib) == 1
    assert fib.remove_nexthop(p, 2)
    assert fib.get(p) is None and len(fib) == 0
    assert not fib.remove_nexthop(p, 2)


def test_remove_face_everywhere() -> None:
    fib = Fib()
    fib.add_nexthop(name("/a"), 1)
    fib.add_nexthop(name("/a"), 2)
    fib.add_nexthop(name("/b"), 1)
    fib.add_nexthop(name("/c"), 3)
    assert fib.remove_face(1) == 2
    assert fib.get(name("/b")) is None
    entry = fib.get(name("/a"))
    assert entry is not None and [nh.face_id for nh in entry.nexthops] == [2]
    assert lpm(fib, "/b/x") is None
    assert fib.remove_face(1) == 0
    assert len(fib) == 2


def test_iteration_in_canonical_order() -> None:
    fib = Fib()
    uris = ["/b", "/a/b", "/a", "/aa", "/"]
    for i, uri in enumerate(uris):
        fib.add_nexthop(name(uri), i)
    prefixes = [e.prefix for e in fib]
    # canonical order: shorter component value first, so /b sorts before /aa
    assert prefixes == [b"", name("/a"), name("/a/b"), name("/b"), name("/aa")]


def test_cap_refuses_new_prefix_and_counts() -> None:
    counters: Counter[str] = Counter()
    fib = Fib(max_entries=2, counters=counters)
    assert fib.add_nexthop(name("/a"), 1)
    assert fib.add_nexthop(name("/b"), 1)
    assert not fib.add_nexthop(name("/c"), 1)
    assert counters["fib.refused_full"] == 1
    assert fib.add_nexthop(name("/a"), 2)  # an existing prefix can still change
    assert len(fib) == 2 and fib.get(name("/c")) is None
    assert counters["fib.insert"] == 2


def test_malformed_prefix_rejected() -> None:
    from icn.errors import DecodeError

    with pytest.raises(DecodeError):
        Fib().add_nexthop(b"\x08\x05ab", 1)
