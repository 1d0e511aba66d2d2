import math
from collections import Counter

from forwarder.table.pit import Pit
from icn.wire.encode import make_data, make_interest
from icn.wire.name import generic
from icn.wire.packet import parse_data, parse_interest
from tests.unit.table.packets import data, digest_interest, interest, interest_for_name, name

N1 = b"\x00\x00\x00\x01"
N2 = b"\x00\x00\x00\x02"
N3 = b"\x00\x00\x00\x03"


def test_same_name_and_flags_aggregate() -> None:
    pit = Pit()
    e1, new1 = pit.find_or_insert(interest("/a/b", nonce=N1))
    e2, new2 = pit.find_or_insert(interest("/a/b", nonce=N2, lifetime=1000))
    assert new1 and not new2
    assert e1 is e2 and len(pit) == 1


def test_different_flags_are_different_entries() -> None:
    pit = Pit()
    entries = set()
    for cbp in (False, True):
        for mbf in (False, True):
            entry, new = pit.find_or_insert(interest("/a", cbp=cbp, mbf=mbf))
            assert new and entry is not None
            assert (entry.can_be_prefix, entry.must_be_fresh) == (cbp, mbf)
            entries.add(id(entry))
    assert len(entries) == 4 and len(pit) == 4
    for cbp in (False, True):
        for mbf in (False, True):
            found = pit.find(interest("/a", cbp=cbp, mbf=mbf))
            assert found is not None and (found.can_be_prefix, found.must_be_fresh) == (cbp, mbf)
    assert pit.find(interest("/b")) is None
    assert pit.find(interest("/a/b")) is None


def test_entry_keeps_representative_interest() -> None:
    pit = Pit()
    i = interest("/a/b", cbp=True)
    entry, _ = pit.find_or_insert(i)
    assert entry is not None
    assert entry.wire == i.wire and entry.name == name("/a/b") and entry.name_ends == i.name_ends
    assert entry.expiry == math.inf and not entry.satisfied and entry.data_freshness == 0
    entry.strategy_info["x"] = 1  # scratch space per entry
    other, _ = pit.find_or_insert(interest("/a/c"))
    assert other is not None and other.strategy_info == {}


def test_in_records_insert_and_refresh() -> None:
    pit = Pit()
    i = interest("/a", nonce=N1)
    entry, _ = pit.find_or_insert(i)
    assert entry is not None
    rec = entry.insert_in_record(3, N1, 10.0, 4000, b"tok", i.wire)
    assert (rec.face_id, rec.nonce, rec.expiry, rec.pit_token, rec.wire, rec.last_renewed) == (
        3,
        N1,
        14.0,
        b"tok",
        i.wire,
        10.0,
    )
    i2 = interest("/a", nonce=N2)
    rec2 = entry.insert_in_record(3, N2, 11.0, 1000, None, i2.wire)
    assert rec2 is rec and len(entry.in_records) == 1
    assert (rec.nonce, rec.expiry, rec.pit_token, rec.wire, rec.last_renewed) == (
        N2,
        12.0,
        None,
        i2.wire,
        11.0,
    )
    entry.insert_in_record(4, N3, 11.0, 1000, None, i2.wire)
    assert sorted(entry.in_records) == [3, 4]


def test_out_records_insert_refresh_and_clear_nack() -> None:
    pit = Pit()
    entry, _ = pit.find_or_insert(interest("/a"))
    assert entry is not None
    rec = entry.insert_out_record(5, N1, 1.0, 2000)
    assert (rec.face_id, rec.nonce, rec.last_sent, rec.expiry, rec.nack_reason) == (
        5,
        N1,
        1.0,
        3.0,
        None,
    )
    rec.nack_reason = 150
    again = entry.insert_out_record(5, N2, 2.0, 2000)
    assert again is rec and (rec.nonce, rec.last_sent, rec.expiry) == (N2, 2.0, 4.0)
    assert again.nack_reason is None


def test_has_nonce_in_and_out_records_with_exclusion() -> None:
    pit = Pit()
    i = interest("/a")
    entry, _ = pit.find_or_insert(i)
    assert entry is not None
    assert not entry.has_nonce(N1)
    entry.insert_in_record(1, N1, 0.0, 4000, None, i.wire)
    assert entry.has_nonce(N1)
    assert not entry.has_nonce(N1, exclude_in_face=1)  # retransmission on the same face
    assert entry.has_nonce(N1, exclude_in_face=2)
    entry.insert_in_record(2, N1, 0.0, 4000, None, i.wire)
    assert entry.has_nonce(N1, exclude_in_face=1)  # face 2 holds it too
    entry.insert_out_record(9, N2, 0.0, 4000)
    assert entry.has_nonce(N2) and entry.has_nonce(N2, exclude_in_face=9)
    assert not entry.has_nonce(N3)
    entry.insert_in_record(1, N3, 0.0, 4000, None, i.wire)  # face 1's last nonce is now N3
    entry.insert_in_record(2, N3, 0.0, 4000, None, i.wire)
    assert not entry.has_nonce(N1)


def test_expire_in_order_and_lazy_rescheduling() -> None:
    counters: Counter[str] = Counter()
    pit = Pit(counters=counters)
    a, _ = pit.find_or_insert(interest("/a"))
    b, _ = pit.find_or_insert(interest("/b"))
    c, _ = pit.find_or_insert(interest("/c"))
    assert a and b and c
    pit.set_expiry(a, 3.0)
    pit.set_expiry(b, 1.0)
    pit.set_expiry(c, 2.0)
    assert pit.next_expiry() == 1.0
    pit.set_expiry(b, 5.0)  # rescheduled later: the old heap item must be ignored
    pit.set_expiry(a, 0.5)  # rescheduled earlier
    assert pit.next_expiry() == 0.5
    assert pit.expire(0.4) == []
    assert pit.expire(2.0) == [a, c]
    assert len(pit) == 1 and pit.find(interest("/a")) is None
    assert pit.expire(4.9) == []
    assert pit.expire(5.0) == [b]
    assert len(pit) == 0 and pit.next_expiry() == math.inf
    assert counters["pit.expired"] == 3 and counters["pit.erase"] == 3


def test_erased_entry_does_not_expire_and_cannot_be_rescheduled() -> None:
    pit = Pit()
    a, _ = pit.find_or_insert(interest("/a"))
    assert a is not None
    pit.set_expiry(a, 1.0)
    pit.erase(a)
    pit.erase(a)  # idempotent
    pit.set_expiry(a, 2.0)
    assert pit.expire(10.0) == [] and len(pit) == 0
    # the same Interest now makes a new entry
    a2, new = pit.find_or_insert(interest("/a"))
    assert new and a2 is not a


def test_unscheduled_entry_never_expires() -> None:
    pit = Pit()
    pit.find_or_insert(interest("/a"))
    assert pit.expire(1e12) == [] and len(pit) == 1


def test_heap_stays_bounded_under_rescheduling() -> None:
    pit = Pit()
    a, _ = pit.find_or_insert(interest("/a"))
    assert a is not None
    for t in range(10_000):
        pit.set_expiry(a, float(t))
    assert len(pit._heap) <= 2 * len(pit) + 65
    assert pit.expire(9_998.0) == [] and pit.expire(9_999.0) == [a]


def test_find_matches_exact_name_only_without_cbp() -> None:
    pit = Pit()
    e, _ = pit.find_or_insert(interest("/a/b"))
    pit.find_or_insert(interest("/a"))  # not CanBePrefix: no match for /a/b
    pit.find_or_insert(interest("/a/b/c"))
    assert pit.find_matches(data("/a/b")) == [e]
    assert pit.find_matches(data("/a/x")) == []


def test_find_matches_can_be_prefix_on_every_prefix_including_full_name() -> None:
    pit = Pit()
    top, _ = pit.find_or_insert(interest("/a", cbp=True))
    mid, _ = pit.find_or_insert(interest("/a/b", cbp=True))
    full, _ = pit.find_or_insert(interest("/a/b/c", cbp=True))
    exact, _ = pit.find_or_insert(interest("/a/b/c"))
    pit.find_or_insert(interest("/a/b/c/d", cbp=True))  # longer: no match
    pit.find_or_insert(interest("/b", cbp=True))
    matches = pit.find_matches(data("/a/b/c"))
    assert {id(e) for e in matches} == {id(top), id(mid), id(full), id(exact)}
    assert len(matches) == 4


def test_find_matches_must_be_fresh_is_irrelevant() -> None:
    pit = Pit()
    fresh, _ = pit.find_or_insert(interest("/a", mbf=True))
    plain, _ = pit.find_or_insert(interest("/a"))
    cbp_fresh, _ = pit.find_or_insert(interest("/a", cbp=True, mbf=True))
    matches = pit.find_matches(data("/a/b", freshness=0))
    assert matches == [cbp_fresh]
    matches = pit.find_matches(data("/a", freshness=0))
    assert {id(e) for e in matches} == {id(fresh), id(plain), id(cbp_fresh)}


def test_find_matches_implicit_digest() -> None:
    pit = Pit()
    d = data("/a/b", b"payload")
    other = data("/a/b", b"other payload")
    by_digest, _ = pit.find_or_insert(digest_interest(d))
    by_digest_cbp, _ = pit.find_or_insert(digest_interest(d, cbp=True))
    by_name, _ = pit.find_or_insert(interest("/a/b"))
    matches = pit.find_matches(d)
    assert {id(e) for e in matches} == {id(by_digest), id(by_digest_cbp), id(by_name)}
    assert pit.find_matches(other) == [by_name]
    # With CanBePrefix a digest-named Interest also matches Data named under it, by prefix.
    assert by_digest is not None
    below = parse_data(make_data(by_digest.name + generic("x")))
    assert pit.find_matches(below) == [by_digest_cbp]


def test_find_matches_after_counts_drop_to_zero() -> None:
    pit = Pit()
    e, _ = pit.find_or_insert(interest("/a", cbp=True))
    assert e is not None
    assert pit.find_matches(data("/a/b")) == [e]
    pit.erase(e)
    assert pit._n_cbp == 0
    assert pit.find_matches(data("/a/b")) == []


def test_remove_face_drops_records_and_orphaned_entries() -> None:
    pit = Pit()
    i = interest("/a")
    only1, _ = pit.find_or_insert(interest("/a"))
    both, _ = pit.find_or_insert(interest("/b"))
    up1, _ = pit.find_or_insert(interest("/c"))
    untouched, _ = pit.find_or_insert(interest("/d"))
    assert only1 and both and up1 and untouched
    only1.insert_in_record(1, N1, 0.0, 4000, None, i.wire)
    both.insert_in_record(1, N1, 0.0, 4000, None, i.wire)
    both.insert_in_record(2, N1, 0.0, 4000, None, i.wire)
    both.insert_out_record(1, N1, 0.0, 4000)
    up1.insert_in_record(2, N1, 0.0, 4000, None, i.wire)
    up1.insert_out_record(1, N1, 0.0, 4000)
    untouched.insert_in_record(3, N1, 0.0, 4000, None, i.wire)
    pit.set_expiry(only1, 4.0)
    assert pit.remove_face(1) == 1
    assert pit.find(interest("/a")) is None
    assert list(both.in_records) == [2] and both.out_records == {}
    assert list(up1.in_records) == [2] and up1.out_records == {}
    assert len(pit) == 3
    assert pit.expire(100.0) == []  # the erased entry's timer is gone too


def test_iteration_covers_all_entries() -> None:
    pit = Pit()
    made = [pit.find_or_insert(interest(u, cbp=c))[0] for u in ("/a", "/b") for c in (False, True)]
    assert {id(e) for e in pit} == {id(e) for e in made}


def test_cap_refuses_and_counts_200k_distinct_interests() -> None:
    counters: Counter[str] = Counter()
    cap = 100_000
    pit = Pit(max_entries=cap, counters=counters)
    prefix = generic("flood")
    for i in range(200_000):
        iv = parse_interest(make_interest(prefix + generic(str(i)), nonce=N1))
        pit.find_or_insert(iv)
    assert len(pit) == cap
    assert counters["pit.refused_full"] == 100_000
    assert counters["pit.insert"] == cap
    # a pending Interest still aggregates when full; a new one is refused
    entry, new = pit.find_or_insert(interest_for_name(prefix + generic("0")))
    assert entry is not None and not new
    assert pit.find_or_insert(interest_for_name(prefix + generic("new"))) == (None, False)
