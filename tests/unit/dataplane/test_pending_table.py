"""The app-side PIT without an event loop: Data by exact name, by prefix and by implicit digest;
Nacks by Nonce (a stale one fails nothing); Trigger Interests extended by their key; the bound."""

from __future__ import annotations

import pytest

from icn.dataplane.pending import PendingEntry, PendingTable
from icn.errors import TooManyPending
from icn.wire.encode import encode_interest, make_data
from icn.wire.name import from_uri
from icn.wire.packet import DataView, parse_data
from icn.wire.reflexive import new_rnp, reflexive_key, trigger_name

NOW = 1000.0  # the caller's clock: the table only compares the numbers it is given


def entry(
    name: bytes | str,
    *,
    nonce: bytes = b"\x00\x00\x00\x01",
    lifetime_ms: int = 4000,
    can_be_prefix: bool = False,
    must_be_fresh: bool = False,
) -> PendingEntry:
    value = from_uri(name) if isinstance(name, str) else name
    enc = encode_interest(
        value, nonce=nonce, can_be_prefix=can_be_prefix, must_be_fresh=must_be_fresh
    )
    e = PendingEntry(enc, lifetime_ms, can_be_prefix, must_be_fresh)
    e.deadline = NOW + e.lifetime
    return e


def data(uri: str, content: bytes = b"x") -> DataView:
    return parse_data(make_data(from_uri(uri), content))


def table(*entries: PendingEntry, max_pending: int = 16) -> PendingTable[PendingEntry]:
    t: PendingTable[PendingEntry] = PendingTable(max_pending)
    for e in entries:
        t.add(e)
    return t


def waiting(t: PendingTable[PendingEntry]) -> bool:
    return t.triggers_waiting  # a call: mypy would pin an asserted property as always true


def test_exact_name_matches_and_a_longer_one_does_not() -> None:
    a, a2, other = entry("/a/b"), entry("/a/b", nonce=b"2222"), entry("/a/c")
    t = table(a, a2, other)
    assert t.match_data(data("/a/b")) == [a, a2]  # both aggregated Interests
    assert t.match_data(data("/a/b/c")) == []  # not CanBePrefix
    assert t.match_data(data("/a")) == []
    assert len(t) == 3  # matching drops nothing: the caller does


def test_can_be_prefix_matches_every_longer_name_and_its_own() -> None:
    plain, cbp = entry("/a"), entry("/a", can_be_prefix=True)
    deep = entry("/a/b", can_be_prefix=True)
    t = table(plain, cbp, deep)
    assert t.match_data(data("/a/b/c")) == [cbp, deep]
    assert t.match_data(data("/a")) == [plain, cbp]
    assert t.match_data(data("/ab")) == []  # a prefix is by component, not by byte
    # with no CanBePrefix entry left the prefix lookups stop; a plain one still never matches
    t.drop(cbp)
    t.drop(deep)
    assert t.match_data(data("/a/b")) == []


def test_implicit_digest_matches_only_that_data() -> None:
    dv = data("/obj", b"one")
    by_digest = entry(dv.full_name)
    assert by_digest.digest
    t = table(by_digest, entry("/obj"))
    assert t.match_data(dv)[-1] is by_digest
    assert by_digest not in t.match_data(data("/obj", b"two"))  # same name, other packet
    t.drop(by_digest)
    assert t.match_data(dv) != [] and by_digest not in t.match_data(dv)


def test_nack_fails_the_transmission_whose_nonce_it_carries_and_its_aggregates() -> None:
    first = entry("/n", nonce=b"aaaa")
    t = table(first)
    assert t.match_nack(first.name, b"aaaa") == [first]
    # retransmitted with another Nonce: the Nack of the first transmission is stale
    t.drop(first)
    again = entry("/n", nonce=b"bbbb")
    t.add(again)
    assert t.match_nack(again.name, b"aaaa") == []
    assert t.match_nack(again.name, b"bbbb") == [again]
    # an Interest with the same name and selectors is aggregated with it; other selectors not
    same = entry("/n", nonce=b"cccc")
    prefix = entry("/n", nonce=b"dddd", can_be_prefix=True)
    fresh = entry("/n", nonce=b"eeee", must_be_fresh=True)
    for e in (same, prefix, fresh):
        t.add(e)
    assert t.match_nack(again.name, b"cccc") == [again, same]
    assert t.match_nack(again.name, b"dddd") == [prefix]
    assert t.match_nack(again.name, b"eeee") == [fresh]
    assert t.match_nack(from_uri("/other"), b"bbbb") == []
    assert t.match_nack(again.name, None) == []  # a Nack without a Nonce answers nothing


def test_reflexive_interests_extend_their_trigger_only_and_never_shorten_it() -> None:
    rnp = new_rnp()
    key = reflexive_key(rnp)
    trigger = entry(trigger_name(from_uri("/svc/fn"), rnp), lifetime_ms=300)
    plain = entry("/svc/other")
    t = table(trigger, plain)
    assert trigger.trigger == key and plain.trigger is None and waiting(t)
    assert t.extend_triggers(key, NOW + 0.6) == [trigger]
    assert trigger.deadline == NOW + 0.6
    assert t.extend_triggers(key, NOW + 0.5) == []  # earlier than it already waits
    assert trigger.deadline == NOW + 0.6
    assert t.extend_triggers(reflexive_key(new_rnp()), NOW + 9) == []
    t.drop(trigger)
    assert not waiting(t) and t.extend_triggers(key, NOW + 9) == []


def test_the_bound_and_dropping() -> None:
    a, b = entry("/a"), entry("/b")
    t = table(a, b, max_pending=2)
    with pytest.raises(TooManyPending):
        t.check_room()
    with pytest.raises(TooManyPending):
        t.add(entry("/c"))
    assert len(t) == 2 and t.match_data(data("/c")) == []
    assert t.drop(a) and not t.drop(a)  # idempotent
    assert len(t) == 1 and a.done
    t.check_room()
    c = entry("/c")
    t.add(c)
    assert sorted(e.name for e in t.entries()) == [b.name, c.name]
    for e in t.entries():  # a copy: dropping while walking it is fine
        t.drop(e)
    assert len(t) == 0 and t.entries() == []


def test_entry_keeps_what_was_encoded() -> None:
    enc = encode_interest(from_uri("/x"), nonce=b"wxyz", app_params=b"p")
    e = PendingEntry(enc, 1500, False, True)
    assert (e.name, e.wire, e.lifetime, e.mbf, e.prefix) == (enc.name, enc.wire, 1.5, True, False)
    assert e.wire[e.nonce_pos : e.nonce_pos + 4] == b"wxyz"
    assert not e.digest and e.congestion_mark == 0 and not e.done
