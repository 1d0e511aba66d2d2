"""Named-function calls across three forwarders: results, thunks, errors, authorization."""

from __future__ import annotations

import asyncio
import hashlib
import os

import numpy as np
import pytest

from compute.rmi import (
    BadArguments,
    NoSuchFunction,
    Overloaded,
    RemoteError,
    ServerConfig,
    ServerUnavailable,
    Timeout,
    Unauthorized,
)
from tests.chaos.harness import CpuLoad
from tests.integration.rmi import funcs
from tests.integration.rmi.conftest import Line
from tests.waiting import wait_until


async def test_small_call_answers_inline(line: Line) -> None:
    server = await line.start_server()
    client = line.client()
    assert await client.call("/svc/echo", {"a": [1, 2.5, "x", b"\x00"]}) == {
        "a": [1, 2.5, "x", b"\x00"]
    }
    assert await client.call("/svc/add", 2, b=40) == 42
    assert server.counters["inline"] + server.counters["memo_hit"] >= 1
    # every forwarder on the way forwarded Reflexive Interests and ended the state
    for i in range(3):
        assert line.counter(i, "fw.reflexive_forwarded") >= 1
        assert len(line.daemons[i].fw.rft) == 0


async def test_ten_megabytes_of_arguments(line: Line) -> None:
    server = await line.start_server()
    client = line.client(timeout=120)
    blob = os.urandom(10 * 1024 * 1024)
    result = await client.call("/svc/digest", blob)
    assert result == {"size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
    assert server.counters["authorized"] == 1 and funcs.RAN["digest"] == 1


async def test_numpy_arguments_and_results(line: Line) -> None:
    await line.start_server()
    client = line.client()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones((4, 2), dtype=np.float32)
    out = await client.call("/svc/matmul", a, b)
    assert isinstance(out, np.ndarray) and np.array_equal(out, a @ b)


async def test_large_result_is_fetched_by_segments(line: Line) -> None:
    await line.start_server()
    client = line.client()
    out = await client.call("/svc/big_result", 1 << 20)
    assert out == bytes(range(256)) * 4096


async def test_five_second_function_through_a_thunk_with_one_second_interests(
    line: Line,
) -> None:
    server = await line.start_server(ServerConfig(ri_lifetime_ms=1000))
    client = line.client(lifetime_ms=1000, max_poll_interval=2.0)
    states: list[tuple[str, float, float]] = []
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    result = await client.invoke("/svc/slow", (5.0,), progress=lambda *seen: states.append(seen))
    took = loop.time() - t0
    assert result == "slept 5.0" and took >= 5.0
    assert server.counters["thunked"] == 1 and client.polls >= 2
    # the first estimate is the function's 5 s less what had passed when the thunk came
    # (however long that took: the server and this caller share the loop's clock)
    state, elapsed, eta = states[0]
    assert state == "running" and eta >= 5.0 - elapsed - 1e-6 and states[-1][0] == "done"
    # no Interest waited past its lifetime: none expired or was retransmitted at the client,
    # and no forwarder let a PIT entry expire unanswered
    assert client.ep.counters["timeout"] == 0 and client.ep.counters["retransmitted"] == 0
    for i in range(3):
        assert line.counter(i, "fw.interest_unsatisfied") == 0


async def test_blocking_function_runs_off_the_loop(line: Line, cpu: CpuLoad) -> None:
    await line.start_server()
    client = line.client()
    held = asyncio.ensure_future(client.call("/svc/held_in_thread"))
    await wait_until(lambda: funcs.RAN["held_in_thread"] == 1)  # its thread is blocked now
    # the server's loop still answers other calls while the thread blocks (it would block
    # until the gate opens, GATE_LIMIT, if the function ran on the loop)
    assert await asyncio.wait_for(client.call("/svc/echo", 1), cpu.budget(5)) == 1
    assert not held.done()
    funcs.GATE.set()
    assert await held == "released"


async def test_cpu_bound_function_runs_in_a_worker_process(line: Line) -> None:
    await line.start_server()
    pid, total = await line.client().call("/svc/cpu_pid", 1000)
    assert pid != os.getpid() and total == sum(range(1000))


async def test_unauthorized_caller_is_refused_before_the_function_runs(line: Line) -> None:
    server = await line.start_server()
    stranger, friend = line.client(), line.client()
    funcs.ALLOWED.add(friend.identity.fingerprint)
    try:
        with pytest.raises(Unauthorized, match="not authorized"):
            await stranger.call("/svc/guarded", 1)
        assert funcs.RAN["guarded"] == 0
        assert server.counters["started"] == 0
        # the refusal came before the arguments were pulled
        assert await friend.call("/svc/guarded", 21) == 42
        assert funcs.RAN["guarded"] == 1
    finally:
        funcs.ALLOWED.clear()


async def test_typed_errors(line: Line) -> None:
    await line.start_server(ServerConfig(max_arg_bytes=1000))
    client = line.client()
    with pytest.raises(RemoteError) as info:
        await client.call("/svc/boom", 7)
    assert info.value.remote_type == "ValueError" and info.value.message == "bad input 7"
    assert "boom" in info.value.remote_traceback
    with pytest.raises(NoSuchFunction, match="served: "):
        await client.call("/svc/nope")
    with pytest.raises(BadArguments, match="missing a required argument"):
        await client.call("/svc/add", 1)
    with pytest.raises(BadArguments, match="exceed"):
        await client.call("/svc/digest", b"x" * 5000)
    assert funcs.RAN["add"] == 0 and funcs.RAN["digest"] == 0


@pytest.mark.parametrize("sessions", [True, False])
async def test_overloaded(line: Line, sessions: bool) -> None:
    # a full server Nacks the call (Congestion), in a session or not, and the forwarders pass
    # the Nack down (there is no other server): the caller gets Overloaded
    server = await line.start_server(ServerConfig(max_jobs=1))
    client = line.client(sessions=sessions)
    first = asyncio.ensure_future(client.call("/svc/held"))
    await wait_until(lambda: funcs.RAN["held"] == 1)  # the one job slot is taken, until...
    with pytest.raises(Overloaded, match="every server of /svc is busy"):
        await client.call("/svc/echo", 1)
    assert server.counters["overloaded"] == 1 and client.counters["overloaded"] == 1
    assert line.counter(0, "fw.in_nack") == 1  # a network Nack, not a Data
    funcs.GATE.set()  # ...the gate opens
    assert await first == "released"
    assert await client.call("/svc/echo", 2) == 2  # a slot free again: the call runs
    await wait_until(lambda: server.in_progress == 0)  # every accepted call gave its slot back


async def test_no_server_and_client_deadline(line: Line) -> None:
    client = line.client(retries=0, lifetime_ms=500)
    with pytest.raises(ServerUnavailable):
        await client.call("/svc/echo", 1)
    await line.start_server()
    with pytest.raises(Timeout):
        await client.invoke("/svc/slow", (3.0,), timeout=1.0)


async def test_private_call_encrypts_arguments_and_result(line: Line) -> None:
    await line.start_server()
    client = line.client()
    secret = b"attack at dawn " * 1000  # segmented: pulled by several Reflexive Interests
    seen: list[bytes] = []
    for face in line.daemons[1].faces:  # everything the middle forwarder sends
        send = face.link.output

        def spy(wire: bytes, send: object = send) -> None:
            seen.append(bytes(wire))
            send(wire)  # type: ignore[operator]

        face.link.output = spy
    result = await client.invoke("/svc/digest", (secret,), private=True)
    assert result["sha256"] == hashlib.sha256(secret).hexdigest()
    assert seen and not any(b"attack at dawn" in w for w in seen)
    assert not any(hashlib.sha256(secret).hexdigest().encode() in w for w in seen)


async def test_repeated_pure_call_is_answered_by_a_content_store(line: Line) -> None:
    server = await line.start_server()
    client = line.client()
    assert await client.call("/svc/add", 1, 2) == 3
    assert funcs.RAN["add"] == 1 and "/svc/add" in client.pure_functions
    reached = server.ep.counters["in_interest"]
    hits = line.counter(0, "fw.cs_hit")
    assert await client.call("/svc/add", 1, 2) == 3
    # nothing reached the server: the first forwarder's content store answered
    assert server.ep.counters["in_interest"] == reached
    assert line.counter(0, "fw.cs_hit") > hits and funcs.RAN["add"] == 1
    # another caller that says the function is pure is answered the same way
    other = line.client()
    assert await other.invoke("/svc/add", (1, 2), pure=True) == 3
    assert server.ep.counters["in_interest"] == reached
    # different arguments are a different name: computed once by the server
    assert await client.call("/svc/add", 2, 2) == 4
    assert funcs.RAN["add"] == 2


async def test_a_poll_goes_out_while_the_server_can_hold_it(line: Line) -> None:
    """A call estimated (learnt) at 1.2 s that takes 0.1: the caller's poll goes out at once,
    is held by the server and answered at completion, not after the estimate.  Polling only
    once the estimate had passed made every call as slow as its function's estimate (an
    executor's reduce took 1.3 s instead of 0.15); the server says which it was: a poll held,
    not one arriving after the result."""
    server = await line.start_server()
    client = line.client()
    assert await client.call("/svc/slow", 1.2) == "slept 1.2"  # learnt: 1.2 s
    held = server.counters["polls_held"]
    assert await client.call("/svc/slow", 0.1) == "slept 0.1"
    assert server.counters["thunked"] == 2
    assert server.counters["polls_held"] == held + 1
