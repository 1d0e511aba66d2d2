"""Reflexive forwarding across three forwarder processes in a line (docs/design.md section 5).

consumer -> fwd0 -> fwd1 -> fwd2 -> producer, over UDP between forwarders and Unix sockets to
the apps.  The consumer has no route: the producer's Reflexive Interests reach it only along the
reverse path its Trigger Interest left behind.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.procs import Child, ProcessGroup, icn_argv
from apps.topology import free_udp_port
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.handlers import Reply
from icn.dataplane.segments import data_content
from icn.errors import InterestTimeout
from icn.wire.encode import make_data
from icn.wire.name import from_uri, reflexive_component
from icn.wire.packet import InterestView
from tests.chaos.harness import CpuLoad

HOST = "127.0.0.1"
N = 3
TI_LIFETIME_MS = 10_000  # the consumer's own timer is not extended by RIs: leave room
RI_LIFETIME_MS = 2_000
DROP_LIFETIME_MS = 500  # RIs expected to go nowhere


@dataclass
class Line:
    forwarders: list[Child]
    sockets: list[Path]


@pytest.fixture
async def line(workdir: Path) -> AsyncIterator[Line]:
    ports = [free_udp_port() for _ in range(N)]
    sockets = [workdir / f"fwd{i}.sock" for i in range(N)]
    with ProcessGroup(workdir) as group:
        forwarders = []
        for i in range(N):
            cfg: dict[str, Any] = {
                "listen": {"udp": [f"{HOST}:{ports[i]}"], "unix": str(sockets[i])},
            }
            if i + 1 < N:  # toward the producer; the last forwarder learns /svc from it
                upstream = f"udp4://{HOST}:{ports[i + 1]}"
                cfg["faces"] = [{"uri": upstream}]
                cfg["routes"] = [{"prefix": "/svc", "face": upstream}]
            path = workdir / f"fwd{i}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            forwarders.append(group.start(f"fwd{i}", icn_argv("fwd", "--config", str(path))))
        for child in forwarders:
            child.wait_for("forwarder ready", stream="stderr")
        yield Line(forwarders, sockets)


async def connect(sock: Path) -> Endpoint:
    return await Endpoint.connect(f"unix://{sock}")


def counters_when(
    line: Line, done: Callable[[list[dict[str, Any]]], bool], within: float
) -> list[dict[str, Any]]:
    """Every forwarder's counters, read again until ``done`` holds of them: a drop is counted
    when the forwarder gets to the packet, not when the sender's Interest has expired."""
    deadline = time.monotonic() + within
    while True:
        got = [f.counters() for f in line.forwarders]
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


async def test_reflexive_exchange_across_three_hops(line: Line, cpu: CpuLoad) -> None:
    producer = await connect(line.sockets[-1])
    consumer = await connect(line.sockets[0])
    try:
        seen: list[bytes] = []  # the reflexive segments of the TIs the producer answered

        async def serve(iv: InterestView, reply: Reply) -> None:
            ends = iv.name_ends
            key = iv.name[ends[-2] :]  # the TI's last component: the consumer's RNP segment
            arg = await producer.express(
                key + from_uri("/args"), lifetime_ms=RI_LIFETIME_MS, timeout=10
            )
            seen.append(key)
            reply(make_data(iv.name, b"result of " + data_content(arg), freshness=0))

        await producer.serve("/svc", serve)

        rnp = secrets.token_bytes(16)
        key = reflexive_component(rnp)

        def answer(iv: InterestView, reply: Reply) -> None:
            reply(make_data(iv.name, b"x=42", freshness=0))

        consumer.handlers.add(key, answer)
        async with asyncio.timeout(20):
            td = await consumer.express(from_uri("/svc/fn") + key, lifetime_ms=TI_LIFETIME_MS)
        assert data_content(td) == b"result of x=42"
        assert seen == [key]
        before = [f.counters() for f in line.forwarders]
        for c in before:
            assert c["fw.reflexive_forwarded"] == 1
            assert c["rft.insert"] == 1 and c["rft.size"] == 0  # ended when the TD passed

        # A guessed RNP: the first forwarder the RI meets drops it; nothing goes further.
        guessed = reflexive_component(secrets.token_bytes(16)) + from_uri("/args")
        with pytest.raises(InterestTimeout):
            await producer.express(guessed, lifetime_ms=DROP_LIFETIME_MS, timeout=10)
        mid = counters_when(
            line, lambda c: c[2].get("fw.drop_reflexive_no_state", 0) >= 1, cpu.budget(5)
        )
        assert mid[2]["fw.drop_reflexive_no_state"] == 1
        assert mid[1]["fw.in_interest"] == before[1]["fw.in_interest"]

        # The exchange is over: the producer may not reach the consumer any more.
        with pytest.raises(InterestTimeout):
            await producer.express(
                key + from_uri("/late"), lifetime_ms=DROP_LIFETIME_MS, timeout=10
            )
        after = counters_when(
            line, lambda c: c[2].get("fw.drop_reflexive_no_state", 0) >= 2, cpu.budget(5)
        )
        assert after[2]["fw.drop_reflexive_no_state"] == 2
        assert after[1]["fw.in_interest"] == before[1]["fw.in_interest"]
        assert after[0]["fw.in_interest"] == before[0]["fw.in_interest"]
        assert consumer.counters["in_interest"] == 1  # only the RI of the live exchange
    finally:
        for ep in (consumer, producer):
            ep.close()
            async with asyncio.timeout(cpu.budget(2)):
                await ep.wait_closed()
