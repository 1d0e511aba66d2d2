"""A small call never asks how large a packet the path carries (two management datasets, whose
first answer costs the forwarder and the client the import of python-ndn's models: about 0.2 s
of CPU, most of a second on a loaded machine, which the calls made while the first call agreed
its session used to wait out); the calls that need it, large ones, share one question."""

from __future__ import annotations

import asyncio

import pytest

from compute.rmi import client as client_module
from icn.dataplane.endpoint import Endpoint
from icn.wire import tlv_types as T
from icn.wire.name import from_uri
from tests.chaos.harness import CpuLoad
from tests.integration.rmi.conftest import PREFIX, Line
from tests.waiting import wait_until


async def test_small_calls_never_wait_on_management_and_large_ones_ask_once(
    line: Line, cpu: CpuLoad, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bytes] = []
    answer = asyncio.Event()

    async def slow_forwarder(ep: Endpoint, prefix: bytes) -> int:  # management held back
        asked.append(prefix)
        await answer.wait()
        return T.MAX_LOCAL_PACKET_SIZE

    monkeypatch.setattr(client_module, "path_packet_limit", slow_forwarder)
    await line.start_server()
    client = line.client()
    within = cpu.budget(5)
    async with asyncio.timeout(within):
        assert await client.call(f"{PREFIX}/echo", 0) == 0  # agrees the session
        results = await asyncio.gather(*(client.call(f"{PREFIX}/echo", i) for i in range(1, 5)))
    assert results == [1, 2, 3, 4]
    assert client.counters["session_calls"] == 4
    assert asked == [], "a small call asked the forwarder for the path"
    # arguments for the session's memory file on one host: the path must be known first, and
    # the calls made while it is asked wait for the one question
    big = [b"x" * (T.MAX_PACKET_SIZE + i) for i in range(3)]
    calls = [asyncio.ensure_future(client.call(f"{PREFIX}/echo", b)) for b in big]
    await wait_until(lambda: len(asked) == 1, within)
    answer.set()
    async with asyncio.timeout(within):
        assert await asyncio.gather(*calls) == big
    assert len(asked) == 1, "calls made while the path was asked asked it again"
    session = client._sessions[from_uri(PREFIX)]
    assert session.packet_limit == T.MAX_LOCAL_PACKET_SIZE
