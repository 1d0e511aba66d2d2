"""The RMI server's shell around held polls, on a loop with a fake endpoint (no network): a poll
held for a call due soon is answered with the result when the call ends, or with a new
estimate ``margin`` before its Interest expires, from one timer for all of them.  On a virtual
clock (tests/virtual_time.py): when each answer goes out is the server's doing, not the CPU's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from compute.rmi.functions import FunctionSpec, function, spec_of
from compute.rmi.jobs import Job
from compute.rmi.server import RmiServer, ServerConfig
from compute.rmi.wire import open_envelope, thunk_name
from icn.wire.encode import Outgoing, data_of, make_interest
from icn.wire.name import from_uri
from icn.wire.packet import parse_data, parse_interest
from tests.virtual_time import virtual_time

PREFIX = from_uri("/svc")


class FakeEndpoint:
    signer: Any = None

    def make_data(self, name: bytes, content: bytes = b"", **_: Any) -> bytes:
        return content  # the envelope itself, to read back


class Replies:
    def __init__(self) -> None:
        self.got: list[tuple[float, bytes]] = []

    def __call__(self, wire: Outgoing) -> None:  # a reply path takes a wire or its parts
        whole = data_of(wire)
        self.got.append((asyncio.get_running_loop().time(), whole))


def slow_spec(gate: asyncio.Event, duration: float) -> FunctionSpec:
    @function(name="slow", duration=duration)
    async def slow() -> int:
        await gate.wait()
        return 42

    spec = spec_of(slow)
    assert spec is not None
    return spec


def start(server: RmiServer, spec: FunctionSpec) -> Job:
    job = server.jobs.start(spec, [], {})
    job.callbacks.append(
        lambda j: server._keep_result(j, server._result_content(j, None, b"rnp", None), None)
    )
    return job


def poll(server: RmiServer, job: Job, reply: Replies, lifetime_ms: int) -> None:
    iv = parse_interest(
        make_interest(thunk_name(PREFIX, job.token), lifetime=lifetime_ms, can_be_prefix=True)
    )
    server._on_interest(iv, reply)


@virtual_time
async def test_held_polls_get_the_result_at_completion_or_an_estimate_in_time() -> None:
    ep: Any = FakeEndpoint()
    server = RmiServer(ep, "/svc", {}, config=ServerConfig(margin=0.1))
    loop = asyncio.get_running_loop()
    never, soon = asyncio.Event(), asyncio.Event()
    stuck = start(server, slow_spec(never, 0.3))
    done = start(server, slow_spec(soon, 0.2))
    t0 = loop.time()
    waits, gets = Replies(), Replies()
    poll(server, stuck, waits, 500)  # due in 0.3 s, within 0.5 - 0.1: held until t0 + 0.4
    poll(server, done, gets, 600)
    late = Replies()
    poll(server, stuck, late, 300)  # not due within 0.3 - 0.1: an estimate at once
    assert server.counters["polls_held"] == 2
    assert len(late.got) == 1 and open_envelope(late.got[0][1])["s"] == "pending"
    await asyncio.sleep(0.1)
    assert waits.got == [] and gets.got == []
    soon.set()
    await asyncio.sleep(0.01)  # (all that was ready ran first: the clock moves only then)
    assert [at for at, _ in gets.got] == [pytest.approx(t0 + 0.1)]  # at completion
    data = parse_data(gets.got[0][1])
    assert data.name == thunk_name(PREFIX, done.token) + data.name[-3:]  # segment 0
    await asyncio.sleep(0.4)
    assert len(waits.got) == 1
    at, wire = waits.got[0]
    assert open_envelope(wire)["s"] == "pending"
    assert at - t0 == pytest.approx(0.4)  # margin (0.1) before its Interest (0.5) expires
    assert server._poll_timer is None  # nothing held: no timer left armed
    never.set()
    await server.close()
