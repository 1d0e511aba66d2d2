"""FaceTable: ids from 256 never reused, sink wiring, close hook exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from forwarder.face.face import Face
from forwarder.face.face_table import FIRST_FACE_ID, FaceTable
from forwarder.face.memory import memory_pair
from forwarder.face_api import FaceLike
from icn.errors import FaceError
from icn.wire.encode import make_interest
from icn.wire.name import from_uri
from tests.unit.face.helpers import ManualSoon, RecordingSink


def make_faces(counters: Counter[str], soon: ManualSoon) -> tuple[Face, Face]:
    a, b = memory_pair(counters, call_soon=soon)
    return Face(a), Face(b)


def test_ids_start_at_256_and_are_never_reused() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    table = FaceTable(counters)
    f1, _ = make_faces(counters, soon)
    f2, _ = make_faces(counters, soon)
    assert table.add(f1) == FIRST_FACE_ID == 256
    assert table.add(f2) == 257
    assert f1.face_id == 256 and table[257] is f2 and len(table) == 2
    f1.close()
    f3, _ = make_faces(counters, soon)
    assert table.add(f3) == 258
    assert 256 not in table and table.get(256) is None


def test_reserved_ids_and_conflicts() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    table = FaceTable(counters)
    f1, f2 = make_faces(counters, soon)
    assert table.add(f1, face_id=1) == 1
    with pytest.raises(FaceError, match="reserved"):
        table.add(f2, face_id=1)
    with pytest.raises(FaceError, match="reserved"):
        table.add(f2, face_id=300)
    f2.close()
    with pytest.raises(FaceError, match="closed"):
        table.add(f2)


def test_add_and_close_hooks_run_exactly_once_per_face() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    closed: list[int] = []
    added: list[Face] = []
    table = FaceTable(counters, on_face_closed=closed.append, on_face_added=added.append)
    a, b = make_faces(counters, soon)
    table.add(a)
    table.add(b)
    assert added == [a, b] and a.face_id == 256  # the id is set before the hook runs
    a.close()  # closes the peer end too (b), as a socket peer would see EOF
    a.close()
    b.close()
    assert sorted(closed) == [256, 257]
    assert len(table) == 0
    assert counters["face.created"] == 2 and counters["face.destroyed"] == 2


def test_table_close_closes_everything() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    closed: list[int] = []
    table = FaceTable(counters, on_face_closed=closed.append)
    for _ in range(3):
        f, _peer = make_faces(counters, soon)
        table.add(f)
    table.close()
    assert sorted(closed) == [256, 257, 258] and len(table) == 0


def test_sink_is_wired_and_can_change() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    first, second = RecordingSink(), RecordingSink()
    table = FaceTable(counters, sink=first)
    face, peer = make_faces(counters, soon)
    table.add(face)
    interest = make_interest(from_uri("/t"), nonce=b"1234")
    peer.send_interest(interest)
    soon.run()
    assert first.interests == [(256, interest, None)]
    table.sink = second
    peer.send_interest(interest)
    soon.run()
    assert second.interests == [(256, interest, None)] and len(first.interests) == 1


def test_find_and_status() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    table = FaceTable(counters, sink=RecordingSink())
    face, peer = make_faces(counters, soon)
    table.add(face)
    assert table.find(face.remote_uri) is face
    assert table.find("udp4://127.0.0.1:1") is None
    peer.send_interest(make_interest(from_uri("/s"), nonce=b"1234"))
    soon.run()
    status = face.status()
    assert status["face_id"] == 256 and status["is_local"] is True
    assert status["n_in_interests"] == 1 and status["n_in_bytes"] == face.transport.in_bytes > 0
    assert status["on_demand"] is False
    assert list(table) == [face]
    as_face_like: FaceLike = face  # mypy checks that Face satisfies the pipelines' interface
    assert as_face_like.face_id == 256
