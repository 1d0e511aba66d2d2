"""The session core, free of I/O: the replay window, the server's table (HMAC, time, sequence,
expiry, bound) on a fake clock, and both ends deriving the same keys."""

from __future__ import annotations

import os

from compute.rmi.policy import Caller
from compute.rmi.session import (
    ClientSession,
    ReplayWindow,
    SessionCheck,
    SessionTable,
    derive_session_secret,
    read_session_params,
    session_name,
    session_params,
)
from icn.security.hmac_signer import HmacSigner
from icn.security.keys import Identity
from icn.security.secretbox import EphemeralKey
from icn.security.signed_interest import encode_signed_interest, read_signed_interest
from icn.wire.name import from_uri
from icn.wire.packet import parse_interest

CALLER = Caller(Identity.generate().public_bytes)
SECRET = os.urandom(64)
WALL = 1_700_000_000_000
NAME = from_uri("/svc/echo")


def test_replay_window_accepts_each_number_once_in_any_order_within_its_size() -> None:
    w = ReplayWindow(size=8)
    assert [w.accept(s) for s in (1, 3, 2, 3, 1)] == [True, True, True, False, False]
    assert w.accept(20)  # a jump ahead
    assert not w.accept(12)  # 8 behind the highest: too old to tell
    assert w.accept(13) and not w.accept(13)
    assert not w.accept(-1)
    # a huge jump (a caller's own session, so past the HMAC) costs nothing and keeps the rule
    assert w.accept(2**62) and not w.accept(2**62) and not w.accept(20)
    assert w.accept(2**62 - 3) and not w.accept(2**62 - 3)


def call(
    table: SessionTable, sid: bytes, *, seq: int, signer: HmacSigner | None = None, **kw: object
) -> str:
    signer = signer or HmacSigner(SECRET[:32], session_name(sid))
    wire = encode_signed_interest(
        NAME + session_name(sid),
        app_params=b"x",
        signer=signer,
        sig_seq=seq,
        **kw,  # type: ignore[arg-type]
    ).wire
    verdict, _ = table.check(sid, read_signed_interest(parse_interest(wire)), 10.0, WALL)
    return verdict


def test_the_table_checks_key_time_and_sequence_before_anything_runs() -> None:
    table = SessionTable(lifetime=60.0, max_skew_ms=1000)
    sid = table.create(CALLER, SECRET, now=0.0).sid
    assert call(table, sid, seq=1, sig_time_ms=WALL) == SessionCheck.OK
    assert call(table, sid, seq=1, sig_time_ms=WALL + 1) == SessionCheck.REPLAY
    other = HmacSigner(os.urandom(32), session_name(sid))
    assert call(table, sid, seq=2, signer=other, sig_time_ms=WALL) == SessionCheck.FORGED
    # a forgery does not burn the number it used
    assert call(table, sid, seq=2, sig_time_ms=WALL) == SessionCheck.OK
    assert call(table, sid, seq=3, sig_time_ms=WALL - 5000) == SessionCheck.STALE
    assert call(table, sid, seq=3, sig_time_ms=WALL) == SessionCheck.OK
    assert call(table, os.urandom(8), seq=9, sig_time_ms=WALL) == SessionCheck.UNKNOWN


def test_sessions_expire_and_the_table_is_bounded() -> None:
    table = SessionTable(lifetime=5.0, max_sessions=2)
    a = table.create(CALLER, SECRET, now=0.0)
    assert table.get(a.sid, 4.9) is a and table.get(a.sid, 5.0) is None and len(table) == 0
    sids = [table.create(CALLER, SECRET, now=10.0).sid for _ in range(3)]
    assert len(table) == 2 and table.get(sids[0], 10.0) is None


def test_both_ends_derive_the_same_keys() -> None:
    server_eph, client_eph = EphemeralKey.generate(), EphemeralKey.generate()
    rnp = os.urandom(16)
    s = derive_session_secret(server_eph, client_eph.public_bytes, rnp)
    c = derive_session_secret(client_eph, server_eph.public_bytes, rnp)
    assert s == c and len(s) == 64
    table = SessionTable()
    server_side = table.create(CALLER, s, now=0.0)
    client_side = ClientSession.agreed(server_side.sid, c, ttl=600.0, now=0.0)
    sealed = client_side.box.seal(b"args", aad=b"call")
    assert server_side.box.open(sealed, aad=b"call") == b"args"
    assert client_side.signer.sign(b"p") == server_side.signer.sign(b"p")
    assert client_side.usable(594.9) and not client_side.usable(595.0)  # ends before the server
    assert [client_side.next_seq() for _ in range(3)] == [1, 2, 3]


def test_session_params_round_trip_and_refuse_garbage() -> None:
    import pytest

    from compute.rmi.errors import BadArguments

    assert read_session_params(session_params(b"a", True, 7000), "f") == (b"a", True, 7000, None)
    for bad in (b"", b"\xc1", session_params(b"a", False, -1)):
        with pytest.raises(BadArguments):
            read_session_params(bad, "f")


def test_answers_kept_for_retransmissions_are_bounded_in_bytes() -> None:
    from compute.rmi.session import SessionCall

    table = SessionTable(max_answer_bytes=10_000)
    a = table.create(CALLER, SECRET, now=0.0)
    b = table.create(CALLER, SECRET, now=0.0)
    calls = []
    for seq, session in enumerate((a, b, a, b), start=1):
        call = SessionCall()
        table.remember(session, seq, call)
        table.answered(session, seq, call, bytes(4000))
        calls.append(call)
    # 16,000 bytes answered, 10,000 kept: the two oldest calls are forgotten
    assert table.answer_bytes == 8000
    assert 1 not in a.calls and 2 not in b.calls
    assert a.calls[3].answer == bytes(4000) and b.calls[4] is calls[3]


def test_answers_of_calls_a_session_forgets_leave_the_count() -> None:
    # each session keeps its last 256 calls: the answers of older ones are no longer kept,
    # and the table's count of them (one entry per call) must not grow without bound
    from compute.rmi.session import SessionCall

    table = SessionTable()
    session = table.create(CALLER, SECRET, now=0.0)
    for seq in range(1, 10_001):
        call = SessionCall()
        table.remember(session, seq, call)
        table.answered(session, seq, call, bytes(100))
    assert len(session.calls) == 256
    assert len(table._answers) == 256 and table.answer_bytes == 256 * 100
