"""An RMI server's /metrics: calls by function and outcome, a duration histogram per function,
and its counters, read from a real endpoint after real calls."""

from __future__ import annotations

import asyncio
import re

import pytest

from compute.rmi import RemoteError
from compute.rmi.serving import serve_rmi_metrics
from tests.integration.rmi.conftest import Line


async def scrape(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
    body = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return body.decode()


def value(text: str, series: str) -> float:
    m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    assert m is not None, f"{series} not in:\n{text[:3000]}"
    return float(m.group(1))


async def test_calls_and_durations_by_function(line: Line) -> None:
    server = await line.start_server()
    endpoint = await serve_rmi_metrics(server, "127.0.0.1:0")
    try:
        client = line.client()
        for i in range(5):
            assert await client.call("/svc/add", i, b=1) == i + 1
        with pytest.raises(RemoteError):
            await client.call("/svc/boom", 3)
        text = await scrape(endpoint.port)
    finally:
        await endpoint.close()
    ok = value(text, 'icn_rmi_calls_total{function="add",outcome="ok"}')
    memo = server.counters["memo_hit"]
    assert ok + memo == 5  # a pure function's repeat may be answered from its memo
    assert value(text, 'icn_rmi_calls_total{function="boom",outcome="failed"}') == 1
    assert value(text, 'icn_rmi_call_duration_seconds_count{function="add"}') == ok
    assert value(text, 'icn_rmi_call_duration_seconds_bucket{function="add",le="+Inf"}') == ok
    assert value(text, 'icn_rmi_events_total{event="calls"}') == server.counters["calls"]
    assert "icn_process_cpu_seconds_total" in text
    assert value(text, "icn_rmi_calls_in_progress") == 0
