"""Per-face shares of the PIT and the reflexive table: one face cannot take everyone's room."""

from __future__ import annotations

from collections import Counter

import pytest

from forwarder.table.face_shares import FaceShares
from forwarder.table.pit import Pit
from forwarder.table.reflexive import ReflexiveTable
from icn.wire.encode import make_interest
from icn.wire.name import from_uri, reflexive_component
from icn.wire.packet import parse_interest


def iv(uri: str, tail: bytes = b"") -> object:
    return parse_interest(make_interest(from_uri(uri) + tail, nonce=b"\0\0\0\1"))


def test_share_reserve_and_full_are_refused_and_counted_apart() -> None:
    counters: Counter[str] = Counter()
    shares = FaceShares("t", 10, face_share=0.3, local_reserve=0.2, counters=counters)
    assert (shares.max_per_face, shares.max_nonlocal) == (3, 8)
    size = 0
    for face in (1, 2, 3):
        while shares.admit(size, face, is_local=False):
            shares.charge(face, is_local=False)
            size += 1
    assert [shares.held_by(f) for f in (1, 2, 3)] == [3, 3, 2]  # face 3 hit the reserve
    assert counters["t.refused_face_share"] == 2 and counters["t.refused_reserve"] == 1
    assert shares.admit(size, 4, is_local=True)  # a local face may use the reserve
    shares.charge(4, is_local=True)
    shares.charge(4, is_local=True)
    size += 2
    assert not shares.admit(size, 5, is_local=True)
    assert counters["t.refused_full"] == 1
    shares.release(1, is_local=False)
    assert shares.held_by(1) == 2 and shares.held_by_nonlocal == 7
    assert shares.admit(size - 1, 1, is_local=False)


def test_small_tables_still_admit_one_entry_per_face() -> None:
    shares = FaceShares("t", 2, face_share=0.25, local_reserve=0.9)
    assert shares.max_per_face == 1 and shares.max_nonlocal == 1


@pytest.mark.parametrize(("share", "reserve"), [(0.0, 0.1), (1.5, 0.1), (0.5, 1.0), (0.5, -0.1)])
def test_bad_fractions_raise(share: float, reserve: float) -> None:
    with pytest.raises(ValueError, match=r"face_share|local_reserve"):
        FaceShares("t", 10, share, reserve)


def test_pit_charges_the_face_that_made_an_entry_until_it_leaves() -> None:
    counters: Counter[str] = Counter()
    pit = Pit(4, counters, face_share=0.5)
    a, new = pit.find_or_insert(iv("/a"), face_id=1, is_local=False)  # type: ignore[arg-type]
    assert a is not None and new and a.owner == 1 and not a.owner_local
    pit.find_or_insert(iv("/b"), face_id=1, is_local=False)  # type: ignore[arg-type]
    assert pit.find_or_insert(iv("/c"), 1, False) == (None, False)  # type: ignore[arg-type]
    assert counters["pit.refused_face_share"] == 1
    # an Interest another face aggregates on an existing entry costs no room
    again, new = pit.find_or_insert(iv("/a"), face_id=2, is_local=False)  # type: ignore[arg-type]
    assert again is a and not new
    assert pit.shares.held_by(1) == 2 and pit.shares.held_by(2) == 0
    pit.erase(a)
    assert pit.shares.held_by(1) == 1
    c, _ = pit.find_or_insert(iv("/c"), face_id=1, is_local=False)  # type: ignore[arg-type]
    assert c is not None
    # expiry and a face going down release the charge too
    pit.set_expiry(c, 5.0)
    pit.expire(10.0)
    assert pit.shares.held_by(1) == 1
    (b,) = list(pit)
    b.insert_in_record(1, b"\0\0\0\1", 0.0, 1000, None, b"")
    assert pit.remove_face(1) == 1
    assert pit.shares.held_by(1) == 0 and pit.shares.held_by_nonlocal == 0


def test_reflexive_table_refuses_a_face_over_its_share() -> None:
    counters: Counter[str] = Counter()
    pit = Pit(100, counters)
    rft = ReflexiveTable(4, counters, face_share=0.5)
    keys = [reflexive_component(bytes([i]) * 16) for i in range(4)]
    entries = []
    for key in keys:
        entry, _ = pit.find_or_insert(iv("/svc/fn", key), face_id=7, is_local=False)  # type: ignore[arg-type]
        assert entry is not None
        entries.append(entry)
    assert rft.insert(keys[0], entries[0]) is not None
    assert rft.insert(keys[1], entries[1]) is not None
    assert rft.insert(keys[2], entries[2]) is None
    assert counters["rft.refused_face_share"] == 1
    assert rft.erase(keys[0], entries[0])
    assert rft.insert(keys[2], entries[2]) is not None
    assert rft.shares.held_by(7) == 2
