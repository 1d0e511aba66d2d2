"""Call sessions over three in-memory forwarders: the first call runs the full exchange and
agrees a session, later calls are one signed Interest each; replays and forgeries never run the
function; a server that lost the session makes the next call fall back once, transparently."""

from __future__ import annotations

import asyncio
import os

import pytest

from compute.rmi import RmiServer, ServerConfig, ServerUnavailable, Unauthorized, collect
from compute.rmi.session import session_name, session_params
from compute.rmi.wire import function_component, open_envelope, pack_args
from icn.dataplane.handlers import Reply
from icn.dataplane.segments import data_content
from icn.security.hmac_signer import HmacSigner
from icn.security.signed_interest import encode_signed_interest
from icn.wire.encode import Outgoing, data_of
from icn.wire.name import as_name
from icn.wire.packet import InterestView, parse_data, parse_interest
from tests.chaos.harness import CpuLoad
from tests.integration.rmi import funcs
from tests.integration.rmi.conftest import PREFIX, Line
from tests.waiting import wait_until


def interests_at_server(line: Line) -> int:
    return line.counter(-1, "fw.in_interest")


async def test_later_calls_take_one_interest_each(line: Line) -> None:
    server = await line.start_server()
    client = line.client()
    assert await client.call(f"{PREFIX}/echo", "first") == "first"
    assert server.counters["sessions"] == 1 and client.counters["sessions"] == 1
    before = interests_at_server(line)
    for i in range(5):
        assert await client.call(f"{PREFIX}/echo", i) == i
    # one Interest per call reached the last forwarder: no Reflexive Interests, no polls
    assert interests_at_server(line) - before == 5
    assert server.counters["session_calls"] == 5 and client.counters["session_calls"] == 5
    assert funcs.RAN["echo"] == 6
    # private calls in the session: sealed both ways under the session's key
    secret = {"card": "4111"}
    assert await client.invoke(f"{PREFIX}/echo", (secret,), private=True) == secret
    assert server.counters["session_calls"] == 6


async def test_concurrent_first_calls_agree_one_session(line: Line) -> None:
    # the calls made while the first one agrees the session wait for it and then use it,
    # instead of each agreeing a session the server would have to keep
    server = await line.start_server()
    client = line.client()
    got = await asyncio.gather(*(client.call(f"{PREFIX}/echo", i) for i in range(8)))
    assert got == list(range(8))
    assert server.counters["sessions"] == 1 and client.counters["sessions"] == 1
    assert server.counters["calls"] == 1 and server.counters["session_calls"] == 7


async def test_calls_waiting_for_a_first_call_that_fails_go_on_without_it(line: Line) -> None:
    # no server yet: the first call fails, and the calls that waited for its session each
    # fail the same way on their own (none waits on forever); then a server comes and the
    # next calls agree one session
    client = line.client(retries=0, lifetime_ms=300)
    got = await asyncio.gather(
        *(client.call(f"{PREFIX}/echo", i) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(e, ServerUnavailable) for e in got), got
    assert not client._agreeing
    server = await line.start_server()
    assert await asyncio.gather(*(client.call(f"{PREFIX}/echo", i) for i in range(3))) == [0, 1, 2]
    assert server.counters["sessions"] == 1


async def test_session_answers_are_kept_out_of_the_server_forwarders_store(line: Line) -> None:
    # a session call's answer is named by its signature, which no later Interest repeats:
    # the server sends it with CachePolicy NoCache and its forwarder does not store it (the
    # field goes from an app to its forwarder, as in NFD: the ones further on cache as usual)
    await line.start_server()
    client = line.client()
    assert await client.call(f"{PREFIX}/echo", 0) == 0
    assert await client.call(f"{PREFIX}/echo", 1) == 1  # (the session's first call)
    held, skipped = len(line.daemons[-1].fw.cs), line.counter(-1, "fw.cs_no_cache")
    for i in range(2, 7):
        assert await client.call(f"{PREFIX}/echo", i) == i
    assert len(line.daemons[-1].fw.cs) == held
    assert line.counter(-1, "fw.cs_no_cache") - skipped == 5
    assert len(line.daemons[0].fw.cs) >= 5  # the forwarders further on cache them


async def test_a_first_call_carries_large_arguments_and_result_whole_on_a_local_path(
    line: Line, cpu: CpuLoad
) -> None:
    # arguments larger than a network packet make the client ask its forwarder about the path
    # first; on a local one they ride in the credential and the result in the answer: no
    # argument segments, no thunk (on a network path they would be pulled as segments).  The
    # inline budget is the CPU's: under load an echo in the thread pool can outlast 50 ms and
    # is then rightly answered by thunk, which is not what this test is about.
    server = await line.start_server(ServerConfig(inline_budget=cpu.budget(1.0)))
    client = line.client()
    blob = os.urandom(64 * 1024)
    before = interests_at_server(line)
    assert await client.call(f"{PREFIX}/echo", blob) == blob
    # the Trigger Interest and the server's Reflexive Interest for the credential, nothing more
    assert interests_at_server(line) - before == 2
    assert server.counters["thunked"] == 0 and server.counters["inline"] == 1
    # and the session the call agreed knows the path: the next call is one Interest
    assert await client.call(f"{PREFIX}/echo", blob) == blob
    assert interests_at_server(line) - before == 3 and server.counters["session_calls"] == 1


async def test_sessions_off_runs_the_full_exchange_every_time(line: Line) -> None:
    server = await line.start_server()
    client = line.client(sessions=False)
    for i in range(3):
        assert await client.call(f"{PREFIX}/echo", i) == i
    assert server.counters["sessions"] == 0 and server.counters["session_calls"] == 0
    assert server.counters["calls"] == 3


class Tap:
    """Keeps a copy of every Interest the server gets, before it handles it."""

    def __init__(self, server: RmiServer) -> None:
        self.seen: list[InterestView] = []
        inner = server._on_interest

        def handler(iv: InterestView, reply: Reply) -> None:
            self.seen.append(iv)
            inner(iv, reply)

        server.ep.handlers.add(server.prefix, handler)


async def test_a_replayed_or_forged_session_interest_never_runs_the_function(line: Line) -> None:
    server = await line.start_server()
    tap = Tap(server)
    client = line.client()
    assert await client.call(f"{PREFIX}/echo", 1) == 1
    assert await client.call(f"{PREFIX}/echo", 2) == 2
    session_iv = tap.seen[-1]
    sid = client._sessions[as_name(PREFIX)].sid
    assert session_name(sid) in session_iv.name
    ran = funcs.RAN["echo"]
    answers: list[bytes] = []

    def capture(wire: Outgoing) -> None:
        answers.append(data_of(wire))

    # the same signed Interest again, as an eavesdropper would send it (a new Nonce so the
    # forwarders pass it): answered with the answer it had, never run again
    server._on_interest(parse_interest(session_iv.with_nonce(b"\x09\x09\x09\x09")), capture)
    await wait_until(lambda: answers)
    assert funcs.RAN["echo"] == ran and server.counters["session_replay"] == 1
    assert len(answers) == 1 and open_envelope(data_content(parse_data(answers[0])))["s"] == "ok"
    # a forged one: the session's id and key name, other arguments, a key that is not its own
    forged = encode_signed_interest(
        as_name(PREFIX) + function_component("echo") + session_name(sid),
        app_params=session_params(pack_args((666,), {}), False, 7000),
        signer=HmacSigner(os.urandom(32), session_name(sid)),
        sig_seq=1000,
    ).wire
    server._on_interest(parse_interest(forged), capture)
    await wait_until(lambda: len(answers) == 2)
    assert funcs.RAN["echo"] == ran and server.counters["session_forged"] == 1
    with pytest.raises(Unauthorized):  # refused, in a Data signed by the session's key
        open_envelope(data_content(parse_data(answers[-1])))
    # a sequence number the forgery used is not burnt: the client's calls go on in the session
    assert await client.call(f"{PREFIX}/echo", 3) == 3
    assert server.counters["sessions"] == 1 and funcs.RAN["echo"] == ran + 1


async def test_a_restarted_server_makes_the_next_call_fall_back_once(line: Line) -> None:
    server = await line.start_server()
    client = line.client()
    assert await client.call(f"{PREFIX}/echo", 1) == 1
    assert await client.call(f"{PREFIX}/echo", 2) == 2
    # the server restarts: same prefix, no sessions
    await server.close()
    server.ep.handlers.remove(server.prefix)
    again = RmiServer(server.ep, PREFIX, collect(funcs))
    await again.start()
    line.server = again
    assert await client.call(f"{PREFIX}/echo", 3) == 3  # fell back, transparently
    assert client.counters["session_fallback"] == 1
    assert again.counters["session_unknown"] == 1 and again.counters["sessions"] == 1
    assert await client.call(f"{PREFIX}/echo", 4) == 4  # in the new session
    assert again.counters["session_calls"] == 1


async def test_authorization_is_decided_per_function_from_the_sessions_key(line: Line) -> None:
    server = await line.start_server()
    client = line.client()
    assert await client.call(f"{PREFIX}/echo", 1) == 1  # a session, for any function
    ran = funcs.RAN["guarded"]
    with pytest.raises(Unauthorized):
        await client.call(f"{PREFIX}/guarded", 2)
    assert funcs.RAN["guarded"] == ran and server.counters["session_calls"] == 1
    funcs.ALLOWED.add(client.identity.fingerprint)
    try:
        assert await client.call(f"{PREFIX}/guarded", 2) == 4
    finally:
        funcs.ALLOWED.discard(client.identity.fingerprint)


async def test_a_session_call_to_a_pure_function_is_answered_from_a_content_store(
    line: Line,
) -> None:
    server = await line.start_server()
    client = line.client()
    assert await client.call(f"{PREFIX}/echo", 0) == 0  # the session
    assert await client.call(f"{PREFIX}/add", 2, 3) == 5
    ran = funcs.RAN["add"]
    assert await client.call(f"{PREFIX}/add", 2, 3) == 5
    assert funcs.RAN["add"] == ran
    assert line.counter(0, "fw.cs_hit") >= 1  # the first forwarder answered the memo probe
    del server


async def test_a_slow_call_in_a_session_is_answered_by_a_thunk_signed_by_the_session(
    line: Line,
) -> None:
    server = await line.start_server()
    client = line.client(lifetime_ms=1000)
    assert await client.call(f"{PREFIX}/echo", 0) == 0  # the session
    # estimated at 0.5 s, it takes 1.5: polls are answered "pending" (signed by the session,
    # as the result is) until the result is there
    got = await asyncio.gather(*(client.call(f"{PREFIX}/blocking", 1.5) for _ in range(2)))
    assert got == [1.5, 1.5]
    assert server.counters["session_calls"] == 2 and server.counters["thunked"] == 2
    assert client.polls > 2
