from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from forwarder.table.cs import ContentStore
from icn.wire.encode import make_data
from icn.wire.name import generic, implicit_digest_component
from icn.wire.packet import DataView, parse_data
from tests.unit.table.packets import data, digest_interest, interest, interest_for_name, name


def test_exact_match_and_counts() -> None:
    counters: Counter[str] = Counter()
    cs = ContentStore(counters=counters)
    d = data("/a/b", b"x")
    assert cs.insert(d, 0.0)
    assert cs.lookup(interest("/a/b"), 0.0) == d.wire
    assert cs.lookup(interest("/a"), 0.0) is None  # not a prefix match without CanBePrefix
    assert cs.lookup(interest("/a/b/c"), 0.0) is None
    assert (cs.hits, cs.misses) == (1, 2)
    assert (counters["cs.hit"], counters["cs.miss"], counters["cs.insert"]) == (1, 2, 1)
    assert len(cs) == 1 and cs.bytes_used == len(d.wire)


def test_can_be_prefix_returns_leftmost() -> None:
    cs = ContentStore()
    for uri in ("/a/c", "/a/b/z", "/a/b", "/b", "/a/bb"):
        cs.insert(data(uri), 0.0)
    assert cs.lookup(interest("/a", cbp=True), 0.0) == data("/a/b").wire
    assert cs.lookup(interest("/a/b", cbp=True), 0.0) == data("/a/b").wire  # equal is a prefix
    assert cs.lookup(interest("/a/b/z", cbp=True), 0.0) == data("/a/b/z").wire
    assert cs.lookup(interest("/a/bb", cbp=True), 0.0) == data("/a/bb").wire
    assert cs.lookup(interest("/a/d", cbp=True), 0.0) is None
    assert cs.lookup(interest("/c", cbp=True), 0.0) is None


def test_can_be_prefix_with_must_be_fresh_skips_stale() -> None:
    cs = ContentStore()
    cs.insert(data("/a/1"), 0.0)  # never fresh
    cs.insert(data("/a/2", freshness=1000), 0.0)
    cs.insert(data("/a/3", freshness=5000), 0.0)
    assert cs.lookup(interest("/a", cbp=True, mbf=True), 0.5) == data("/a/2", freshness=1000).wire
    assert cs.lookup(interest("/a", cbp=True, mbf=True), 1.0) == data("/a/3", freshness=5000).wire
    assert cs.lookup(interest("/a", cbp=True, mbf=True), 5.0) is None
    assert cs.lookup(interest("/a", cbp=True), 5.0) == data("/a/1").wire


def test_must_be_fresh_exact() -> None:
    cs = ContentStore()
    cs.insert(data("/f", freshness=1000), 10.0)
    cs.insert(data("/z", freshness=0), 10.0)
    cs.insert(data("/n"), 10.0)  # FreshnessPeriod absent
    assert cs.lookup(interest("/f", mbf=True), 10.999) is not None
    assert cs.lookup(interest("/f", mbf=True), 11.0) is None  # stale after the period
    assert cs.lookup(interest("/f"), 11.0) is not None  # stale still answers without MustBeFresh
    assert cs.lookup(interest("/z", mbf=True), 10.0) is None
    assert cs.lookup(interest("/n", mbf=True), 10.0) is None
    assert cs.lookup(interest("/z"), 10.0) is not None


def test_implicit_digest_lookup() -> None:
    cs = ContentStore()
    d = data("/a/b", b"payload", freshness=1000)
    cs.insert(d, 0.0)
    assert cs.lookup(digest_interest(d), 0.0) == d.wire
    assert cs.lookup(digest_interest(d, cbp=True), 0.0) == d.wire
    assert cs.lookup(digest_interest(d, mbf=True), 0.5) == d.wire
    assert cs.lookup(digest_interest(d, mbf=True), 2.0) is None
    wrong = data("/a/b", b"other payload")
    assert cs.lookup(digest_interest(wrong), 0.0) is None
    # a single-component digest Interest names a Data with the empty name
    root = parse_data(make_data(b"", b"r"))
    cs.insert(root, 0.0)
    assert cs.lookup(interest_for_name(implicit_digest_component(root.wire)), 0.0) == root.wire


def test_digest_interest_with_can_be_prefix_also_matches_below() -> None:
    cs = ContentStore()
    d = data("/a/b", b"payload")
    full = d.name + implicit_digest_component(d.wire)
    below = parse_data(make_data(full + generic("x")))
    cs.insert(below, 0.0)
    assert cs.lookup(interest_for_name(full, cbp=True), 0.0) == below.wire
    assert cs.lookup(interest_for_name(full), 0.0) is None
    cs.insert(d, 0.0)
    assert cs.lookup(interest_for_name(full, cbp=True), 0.0) == d.wire  # /a/b sorts first


def test_lru_eviction_order_and_hit_refresh() -> None:
    counters: Counter[str] = Counter()
    cs = ContentStore(max_entries=3, counters=counters)
    for uri in ("/1", "/2", "/3"):
        cs.insert(data(uri), 0.0)
    assert cs.lookup(interest("/1"), 0.0) is not None  # /1 becomes most recent
    cs.insert(data("/4"), 0.0)  # evicts /2, the least recently used
    assert cs.lookup(interest("/2"), 0.0) is None
    assert cs.lookup(interest("/1"), 0.0) is not None
    cs.insert(data("/5"), 0.0)  # evicts /3
    assert cs.lookup(interest("/3"), 0.0) is None
    assert cs.lookup(interest("/3", cbp=True), 0.0) is None  # gone from the sorted index too
    assert len(cs) == 3 and counters["cs.evicted_lru"] == 2


def test_can_be_prefix_hit_refreshes_lru() -> None:
    cs = ContentStore(max_entries=2)
    cs.insert(data("/a/1"), 0.0)
    cs.insert(data("/b"), 0.0)
    assert cs.lookup(interest("/a", cbp=True), 0.0) is not None
    cs.insert(data("/c"), 0.0)
    assert cs.lookup(interest("/a/1"), 0.0) is not None
    assert cs.lookup(interest("/b"), 0.0) is None


def test_byte_budget_eviction_and_too_large_refused() -> None:
    counters: Counter[str] = Counter()
    one = len(data("/1", b"x" * 100).wire)
    cs = ContentStore(max_entries=100, max_bytes=3 * one, counters=counters)
    for i in range(1, 4):
        assert cs.insert(data(f"/{i}", b"x" * 100), 0.0)
    assert cs.bytes_used == 3 * one
    assert cs.insert(data("/4", b"x" * 100), 0.0)
    assert len(cs) == 3 and cs.bytes_used == 3 * one and counters["cs.evicted_lru"] == 1
    big = data("/big", b"x" * (3 * one))
    assert not cs.insert(big, 0.0)
    assert counters["cs.refused_too_large"] == 1 and len(cs) == 3
    # a Data of two slots evicts the two oldest
    two = data("/two", b"x" * (one + 50))
    assert cs.insert(two, 0.0)
    assert cs.lookup(interest("/4"), 0.0) is not None
    assert cs.lookup(interest("/2"), 0.0) is None and cs.lookup(interest("/3"), 0.0) is None
    assert cs.bytes_used == one + len(two.wire) <= cs.max_bytes


def test_replace_same_name_refreshes() -> None:
    counters: Counter[str] = Counter()
    cs = ContentStore(max_entries=2, counters=counters)
    old = data("/a", b"old", freshness=1000)
    new = data("/a", b"newer", freshness=1000)
    cs.insert(old, 0.0)
    cs.insert(data("/b"), 0.0)
    assert cs.insert(new, 5.0)
    assert len(cs) == 2 and cs.bytes_used == len(new.wire) + len(data("/b").wire)
    assert cs.lookup(interest("/a", mbf=True), 5.5) == new.wire  # freshness restarted
    assert counters["cs.replace"] == 1
    cs.insert(data("/c"), 5.0)  # /a was refreshed by the replace: /b goes
    assert cs.lookup(interest("/b"), 5.0) is None
    assert cs.lookup(digest_interest(old), 5.0) is None
    assert cs.lookup(digest_interest(new), 5.0) == new.wire


def test_erase_prefix_with_limit() -> None:
    counters: Counter[str] = Counter()
    cs = ContentStore(counters=counters)
    for uri in ("/a/1", "/a/2", "/a/3", "/ab", "/b"):
        cs.insert(data(uri), 0.0)
    assert cs.erase(name("/a"), limit=2) == 2
    assert cs.lookup(interest("/a/1"), 0.0) is None and cs.lookup(interest("/a/2"), 0.0) is None
    assert cs.lookup(interest("/a/3"), 0.0) is not None
    assert cs.erase(name("/a")) == 1
    assert cs.erase(name("/a")) == 0
    assert len(cs) == 2 and counters["cs.erased"] == 3
    assert cs.bytes_used == len(data("/ab").wire) + len(data("/b").wire)
    assert cs.erase(b"", limit=0) == 0
    assert cs.erase(b"") == 2 and len(cs) == 0 and cs.bytes_used == 0


def test_admit_and_serve_flags() -> None:
    counters: Counter[str] = Counter()
    cs = ContentStore(counters=counters)
    cs.admit = False
    assert not cs.insert(data("/a"), 0.0) and len(cs) == 0
    assert counters["cs.refused_admit"] == 1
    cs.admit = True
    assert cs.insert(data("/a"), 0.0)
    cs.serve = False
    assert cs.lookup(interest("/a"), 0.0) is None
    cs.serve = True
    assert cs.lookup(interest("/a"), 0.0) is not None


def test_zero_capacity_refuses() -> None:
    cs = ContentStore(max_entries=0)
    assert not cs.insert(data("/a"), 0.0)
    assert cs.lookup(interest("/a"), 0.0) is None


def test_set_limits_shrinks_at_once() -> None:
    counters: Counter[str] = Counter()
    cs = ContentStore(counters=counters)
    for i in range(10):
        cs.insert(data(f"/{i}"), 0.0)
    cs.set_limits(max_entries=4)
    assert len(cs) == 4 and cs.max_entries == 4 and counters["cs.evicted_lru"] == 6
    assert cs.lookup(interest("/9"), 0.0) is not None
    assert cs.lookup(interest("/5"), 0.0) is None
    one = len(data("/9").wire)
    cs.set_limits(max_bytes=2 * one)
    assert len(cs) == 2 and cs.max_bytes == 2 * one and cs.max_entries == 4
    assert cs.lookup(interest("/9"), 0.0) is not None  # most recently used survives
    cs.set_limits(max_entries=0)
    assert len(cs) == 0 and cs.bytes_used == 0


def test_unsolicited_mark_cleared_by_solicited_refresh() -> None:
    cs = ContentStore()
    cs.insert(data("/a"), 0.0, unsolicited=True)
    assert cs._entries[name("/a")].unsolicited
    cs.insert(data("/a"), 0.0)
    assert not cs._entries[name("/a")].unsolicited
    cs.insert(data("/a"), 0.0, unsolicited=True)
    assert not cs._entries[name("/a")].unsolicited


_components = st.sampled_from([generic(c) for c in ("a", "b", "aa", "", "z")])
_names = st.lists(_components, min_size=1, max_size=3).map(b"".join)


def _matches_prefix(d: DataView, prefix: bytes, mbf: bool, now: float) -> bool:
    fresh = d.freshness > 0 and now < d.freshness / 1000
    return d.name.startswith(prefix) and (not mbf or fresh)


@settings(max_examples=200, deadline=None)
@given(
    stored=st.lists(st.tuples(_names, st.sampled_from([0, 1000, 3000])), max_size=12),
    query=_names,
    mbf=st.booleans(),
    now=st.sampled_from([0.5, 2.0, 4.0]),
)
def test_can_be_prefix_agrees_with_brute_force(
    stored: list[tuple[bytes, int]], query: bytes, mbf: bool, now: float
) -> None:
    cs = ContentStore()
    latest: dict[bytes, DataView] = {}
    for n, fresh in stored:
        d = parse_data(make_data(n, freshness=fresh))
        cs.insert(d, 0.0)
        latest[n] = d
    expected = min(
        (n for n, d in latest.items() if _matches_prefix(d, query, mbf, now)), default=None
    )
    got = cs.lookup(interest_for_name(query, cbp=True, mbf=mbf), now)
    assert got == (None if expected is None else latest[expected].wire)
