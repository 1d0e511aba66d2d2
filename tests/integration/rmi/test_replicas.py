"""Replicas of one prefix behind an adaptive forwarder, in this process: the caller's forwarder
has two next hops for /svc, each a forwarder with a server of /svc (replica ids r1 and r2), and
routes to each replica's own names (/svc/_r/r1, /svc/_r/r2).

    client -- f0 --+-- f1 -- server r1
                   +-- f2 -- server r2

f0 uses asf on /svc with probe~divert (a call reaches one replica) and asf with clone-after on
/svc/_idem (where idempotent calls go and may run on both).  r1's face on f0 has the lower id,
so with nothing measured the first call goes to r1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from apps.inproc import add_route, attach_endpoint, link
from compute.rmi import (
    Client,
    FunctionSpec,
    NoSuchFunction,
    RmiServer,
    ServerConfig,
    collect,
    function,
)
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.fw.asf import AsfStrategy
from forwarder.mgmt.rib import ORIGIN_STATIC, ROUTE_CAPTURE, ROUTE_CHILD_INHERIT, Route
from icn.wire.name import from_uri
from tests.chaos.harness import CpuLoad
from tests.integration.rmi import funcs
from tests.waiting import wait_until

PREFIX = "/svc"
ASF = "/localhost/nfd/strategy/asf/v=5"
DIVERT = ASF + "/probe~divert/probing-interval~60000"  # probes only the first call
CLONE = ASF + "/clone-after~30/probing-interval~60000"
REPLICAS = ("r1", "r2")


def pick_for(me: str) -> FunctionSpec:
    """``pick(slow_on)``, idempotent: answers ``me`` at once, unless ``slow_on`` is ``me``:
    then it sleeps 10 s first (the straggler)."""

    @function(name="pick", idempotent=True)
    async def pick(slow_on: str) -> str:
        funcs.RAN[f"pick@{me}"] += 1
        if slow_on == me:
            await asyncio.sleep(10.0)
        return me

    spec = pick.__rmi__  # type: ignore[attr-defined]
    assert isinstance(spec, FunctionSpec)
    return spec


@dataclass
class Replicas:
    f0: ForwarderDaemon
    fws: list[ForwarderDaemon]
    servers: dict[str, RmiServer] = field(default_factory=dict)
    faces: dict[str, int] = field(default_factory=dict)  # replica -> its face on f0
    clients: list[Client] = field(default_factory=list)

    def client(self, **options: Any) -> Client:
        c = Client(attach_endpoint(self.f0), **options)
        self.clients.append(c)
        return c

    def counter(self, name: str) -> int:
        return self.f0.counters.get(name, 0)

    def asf(self, prefix: str) -> AsfStrategy:
        s = self.f0.fw.strategy_choice.get(from_uri(prefix))
        assert isinstance(s, AsfStrategy)
        return s


async def start_replicas(configs: dict[str, ServerConfig]) -> Replicas:
    f0 = ForwarderDaemon(config_from_dict({"listen": {"udp": ["127.0.0.1:0"]}}))
    await f0.start()
    net = Replicas(f0, [])
    for replica in REPLICAS:
        fw = ForwarderDaemon(config_from_dict({"listen": {"udp": ["127.0.0.1:0"]}}))
        await fw.start()
        net.fws.append(fw)
        face, _ = link(f0, fw)
        net.faces[replica] = face
        add_route(f0, PREFIX, face)
        # the replica's own names go to it alone (CAPTURE: /svc's routes are not inherited)
        f0.rib.register(
            from_uri(f"{PREFIX}/_r/{replica}"),
            Route(face, ORIGIN_STATIC, 0, ROUTE_CHILD_INHERIT | ROUTE_CAPTURE),
        )
        functions = {**collect(funcs), "pick": pick_for(replica)}
        server = RmiServer(attach_endpoint(fw), PREFIX, functions, config=configs[replica])
        await server.start()
        net.servers[replica] = server
    f0.fw.set_strategy(from_uri(PREFIX), DIVERT)
    f0.fw.set_strategy(from_uri(f"{PREFIX}/_idem"), CLONE)
    return net


@pytest.fixture
async def replicas() -> AsyncIterator[Callable[..., Any]]:
    nets: list[Replicas] = []

    async def make(**overrides: Any) -> Replicas:
        configs = {r: ServerConfig(replica=r, **overrides.get(r, {})) for r in REPLICAS}
        net = await start_replicas(configs)
        nets.append(net)
        return net

    funcs.RAN.clear()
    funcs.GATE.clear()
    try:
        yield make
    finally:
        funcs.GATE.set()  # no held job outlives its test
        for net in nets:
            for c in net.clients:
                c.close()
            for server in net.servers.values():
                await server.close()
                server.ep.close()
            for d in [net.f0, *net.fws]:
                await d.stop()


async def test_a_full_replica_nacks_and_its_calls_move_to_the_other_with_their_thunks(
    replicas: Callable[..., Any],
) -> None:
    # r1, the first choice, takes one call at a time; six calls at once, each held until all
    # six run and are answered by thunks: r1 Nacks the ones it cannot take (Congestion), asf
    # sends them on to r2
    net: Replicas = await replicas(r1={"max_jobs": 1})
    r1, r2 = net.servers["r1"], net.servers["r2"]
    client = net.client(sessions=False)
    calls = asyncio.gather(*(client.call(f"{PREFIX}/held") for _ in range(6)))
    thunked = lambda: r1.counters["thunked"] + r2.counters["thunked"]  # noqa: E731
    await wait_until(lambda: (funcs.RAN["held"] == 6 and thunked() == 6) or calls.done())
    funcs.GATE.set()
    got = await calls
    assert got == ["released"] * 6  # none Overloaded
    assert r1.counters["overloaded"] >= 1 and net.counter("fw.asf_congestion") >= 1
    assert r1.counters["completed"] >= 1 and r2.counters["completed"] >= 4
    assert r1.counters["thunked"] + r2.counters["thunked"] == 6
    # each thunk was polled at its own replica (/svc/_r/<replica>/_thunk/...), none lost
    assert r1.counters["polls"] >= 1 and r2.counters["polls"] >= 1
    assert client.counters["overloaded"] == 0
    ns = net.asf(PREFIX).measurements.find(from_uri(PREFIX))
    assert ns is not None
    assert all(h.failures == 0 for h in ns.hops.values())  # busy is not failed
    await wait_until(lambda: r1.in_progress == r2.in_progress == 0)  # no job slot kept


async def test_a_session_call_landing_on_the_other_replica_falls_back_once(
    replicas: Callable[..., Any],
) -> None:
    net: Replicas = await replicas(r1={"max_jobs": 1}, r2={"max_jobs": 1})
    client = net.client()
    # a few calls, until asf settles (its one probe takes a call to the other replica, which
    # answers "no such session", an application Nack: the probe is owed, so that call's full
    # exchange goes there too and measures it; later calls may move back, falling back once)
    for n in range(4):
        assert await client.call(f"{PREFIX}/echo", n) == n
    busy = asyncio.ensure_future(client.call(f"{PREFIX}/held"))  # home's one job slot
    await wait_until(lambda: funcs.RAN["held"] == 1)
    # home: where the held call runs, in the caller's session (there already, or agreed
    # there by the full exchange the call fell back to)
    (home,) = [r for r, s in net.servers.items() if s.in_progress == 1]
    sid = client._sessions[from_uri(PREFIX)].sid
    assert net.servers[home]._sessions.get(sid, 0.0) is not None
    (other,) = [r for r in REPLICAS if r != home]
    fallbacks = client.counters["session_fallback"]
    unknown_before = net.servers[other].counters["session_unknown"]
    sessions_before = net.servers[other].counters["sessions"]
    # home Nacks the next session call, asf takes it to the other replica, which does not
    # know the session: the caller runs the full exchange there, once, and gets a session
    assert await client.call(f"{PREFIX}/echo", 10) == 10
    assert client.counters["session_fallback"] == fallbacks + 1
    there = net.servers[other]
    assert there.counters["session_unknown"] == unknown_before + 1
    assert there.counters["sessions"] == sessions_before + 1
    calls_before = there.counters["session_calls"]
    for n in range(11, 15):  # in the other's session now, wherever asf sends the calls first
        assert await client.call(f"{PREFIX}/echo", n) == n
    assert client.counters["session_fallback"] == fallbacks + 1  # once
    assert there.counters["session_calls"] == calls_before + 4
    funcs.GATE.set()
    assert await busy == "released"
    # every "no such session" went back as an application-level Nack, which asf takes as no
    # RTT sample (it says nothing of how long that replica takes to serve a call)
    unknown = sum(s.counters["session_unknown"] for s in net.servers.values())
    assert net.counter("fw.asf_app_nack") == unknown >= 1


async def test_an_idempotent_call_is_cloned_and_the_losing_replica_stops_its_job(
    replicas: Callable[..., Any], cpu: CpuLoad
) -> None:
    # inline answers up to 1 s: the straggler does not answer with a thunk before the clone
    inline = {"inline_budget": 1.0}
    net: Replicas = await replicas(r1=inline, r2=inline)
    client = net.client()
    assert await client.call(f"{PREFIX}/pick", "nobody") in REPLICAS  # learnt: idempotent
    assert f"{PREFIX}/pick" in client.idempotent_functions
    assert await client.call(f"{PREFIX}/pick", "nobody") in REPLICAS  # under /svc/_idem
    # the straggler is the replica the next call goes to first, once every answer of that
    # call is in (a clone's late answer measures its replica too)
    strategy = net.asf(f"{PREFIX}/_idem")
    await wait_until(lambda: len(strategy.late) == 0 and len(net.f0.fw.pit) == 0)
    ns = strategy.measurements.find(from_uri(PREFIX))
    fib_entry = net.f0.fw.fib.get(from_uri(PREFIX))
    assert ns is not None and fib_entry is not None
    best = strategy.best_face(ns, fib_entry.nexthops, net.f0.fw.clock())
    (straggler,) = [r for r, face in net.faces.items() if face == best]
    other = "r2" if straggler == "r1" else "r1"
    slow = net.servers[straggler]
    completed = slow.counters["completed"]
    loop = asyncio.get_running_loop()
    cpu.budget(1.0)  # the load before the timed part counts too (the larger is kept)
    start = loop.time()
    assert await client.call(f"{PREFIX}/pick", straggler) == other  # the clone's answer
    # not the straggler's 10 s: a second on a quiet machine (at most 8 under load)
    assert loop.time() - start < cpu.budget(1.0)
    assert net.counter("fw.clone") >= 1 and net.counter("fw.clone_won") >= 1
    await wait_until(lambda: not slow.jobs.running)  # its job was cancelled (not its 10 s)
    assert slow.counters["cancelled_clone"] >= 1 and slow.counters["cancelled"] >= 1
    assert client.counters["clones_cancelled"] >= 1
    assert slow.counters["completed"] == completed  # the stalled job never finished


async def test_pure_calls_over_replicas_fetch_the_memo_from_the_replica_that_answered(
    replicas: Callable[..., Any],
) -> None:
    net: Replicas = await replicas()
    client = net.client()
    for n in range(8):
        assert await client.call(f"{PREFIX}/add", n, 1) == n + 1
    answered = sum(s.counters["memo_served"] for s in net.servers.values())
    assert answered >= 8 and client.counters["overloaded"] == 0


async def test_a_function_that_is_not_idempotent_is_refused_under_idem(
    replicas: Callable[..., Any],
) -> None:
    net: Replicas = await replicas()
    client = net.client()
    with pytest.raises(NoSuchFunction, match="echo is not idempotent"):
        await client.invoke(f"{PREFIX}/echo", (1,), idempotent=True)
    assert funcs.RAN["echo"] == 0
