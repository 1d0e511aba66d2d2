"""A line of forwarders in this process, linked in memory: client on the first, server on the
last, so every call crosses three forwarders and the reflexive state of each."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from apps.inproc import add_route, attach_endpoint, link
from compute.rmi import Client, RmiServer, ServerConfig, collect
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from tests.integration.rmi import funcs

PREFIX = "/svc"


@dataclass
class Line:
    daemons: list[ForwarderDaemon]
    server: RmiServer | None = None
    clients: list[Client] = field(default_factory=list)

    async def start_server(self, config: ServerConfig | None = None) -> RmiServer:
        self.server = RmiServer(
            attach_endpoint(self.daemons[-1]), PREFIX, collect(funcs), config=config
        )
        await self.server.start()
        return self.server

    def client(self, **options: object) -> Client:
        c = Client(attach_endpoint(self.daemons[0]), **options)  # type: ignore[arg-type]
        self.clients.append(c)
        return c

    def counter(self, i: int, name: str) -> int:
        return self.daemons[i].counters.get(name, 0)


async def start_line(n: int = 3) -> Line:
    daemons = []
    for _ in range(n):
        d = ForwarderDaemon(config_from_dict({"listen": {"udp": ["127.0.0.1:0"]}}))
        await d.start()
        daemons.append(d)
    for left, right in itertools.pairwise(daemons):
        face_in_left, _ = link(left, right)
        add_route(left, PREFIX, face_in_left)
    return Line(daemons)


@pytest.fixture
async def line() -> AsyncIterator[Line]:
    net = await start_line(3)
    funcs.RAN.clear()
    funcs.GATE.clear()
    try:
        yield net
    finally:
        funcs.GATE.set()  # no held job outlives its test
        for c in net.clients:
            c.close()
        if net.server is not None:
            await net.server.close()
            net.server.ep.close()
        for d in net.daemons:
            await d.stop()
