"""MQTT at both ends of a flow, with a real mosquitto: QoS 1 messages go through a graph and
out to a topic; and with the source's process SIGKILLed mid-stream and started again, no
message published to the broker is missing from the output (the source logs each batch and
acknowledges the messages in it only then)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.cli.flow import READY
from apps.inproc import attach_endpoint
from apps.mqtt_broker import MosquittoBroker
from apps.procs import ProcessGroup, icn_argv
from compute.stream.flow import FlowRun
from compute.stream.graph import parse_graph
from compute.stream.mqtt_io import MqttSink, MqttSource
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint
from tests.chaos.harness import CpuLoad
from tests.waiting import wait_until


@pytest.fixture
async def broker() -> AsyncIterator[MosquittoBroker]:
    async with MosquittoBroker() as b:
        yield b


def graph(broker: MosquittoBroker, sink: dict[str, Any], state: Path) -> dict[str, Any]:
    return {
        "flow": "/mq",
        "settings": {"checkpoint": "200ms", "state_dir": str(state), "lifetime": "1s"},
        "operators": [
            {
                "name": "readings",
                "type": "mqtt_source",
                "broker": f"127.0.0.1:{broker.port}",
                "topic": "in/#",
                "time_field": "t",
                "linger": "20ms",
                "client_id": "flow-src",
            },
            {
                "name": "doubled",
                "type": "map",
                "input": "readings",
                "fn": "tests.integration.stream.funcs:double",
            },
            {"name": "out", "input": "doubled", **sink},
        ],
    }


async def publish(
    broker: MosquittoBroker, n: int, rate: float, first: int = 0, sent: list[int] | None = None
) -> None:
    """``n`` messages at ``rate`` per second (pacing: a stream, not a burst); ``sent[0]`` counts
    those the broker has acknowledged."""
    sink = MqttSink("127.0.0.1", broker.port, client_id="test-publisher")
    await sink.start()
    try:
        start = time.monotonic()
        for i in range(first, first + n):
            await asyncio.sleep(max(0.0, start + (i - first) / rate - time.monotonic()))
            body = {"i": i, "t": i, "sensor": f"s{i % 3}", "value": i}
            await sink.publish(f"in/s{i % 3}", json.dumps(body).encode())
            if sent is not None:
                sent[0] += 1
    finally:
        await sink.close()


async def test_qos1_messages_through_a_graph_and_out_over_mqtt(
    broker: MosquittoBroker, workdir: Path
) -> None:
    n = 1500
    listener = MqttSource("127.0.0.1", broker.port, "out/#", client_id="test-listener")
    await listener.start()
    spec = graph(
        broker,
        {"type": "mqtt_sink", "broker": broker.url, "topic": "out/{key}"},
        workdir / "state",
    )
    spec["operators"][0]["key_field"] = "sensor"
    daemon = ForwarderDaemon(config_from_dict({"listen": {}}))
    await daemon.start()

    async def connect() -> Endpoint:
        return attach_endpoint(daemon)

    run = FlowRun(parse_graph(spec), connect)
    got: list[dict[str, Any]] = []
    try:
        await run.start()
        await publish(broker, n, rate=3000)
        async with asyncio.timeout(30):
            while len(got) < n:
                messages = await listener.get(500, 1.0)
                got += [json.loads(m.payload) for m in messages]
                listener.ack(messages)
    finally:
        await run.stop()
        await daemon.stop()
        await listener.close()
    assert sorted(r["value"]["i"] for r in got) == list(range(n))  # each exactly once
    assert all(r["value"]["value"] == 2 * r["value"]["i"] for r in got)
    assert {r["key"] for r in got} == {"s0", "s1", "s2"}


@pytest.mark.fault
async def test_killed_mqtt_source_loses_no_message(
    broker: MosquittoBroker, workdir: Path, cpu: CpuLoad
) -> None:
    n, rate = 3000, 1000.0
    out = workdir / "out.jsonl"
    path = workdir / "graph.yaml"
    path.write_text(
        yaml.safe_dump(graph(broker, {"type": "file_sink", "path": str(out)}, workdir / "state"))
    )
    sock = workdir / "fwd.sock"

    def delivered() -> list[int]:
        text = out.read_text() if out.exists() else ""
        return [json.loads(line)["value"]["i"] for line in text.splitlines()]

    def some_delivered() -> bool:
        return out.exists() and out.stat().st_size > 0

    with ProcessGroup(workdir) as group:

        def flow(name: str, only: str) -> Any:
            argv = icn_argv("flow", "run", str(path), "--transport", f"unix://{sock}")
            return group.start(name, [*argv, "--only", only, "--quiet"])

        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)))
        fwd.wait_for("forwarder ready", stream="stderr", timeout=cpu.budget(15))
        source = flow("source", "readings")
        rest = flow("rest", "doubled,out")
        # the broker keeps messages for the source's session only once it has subscribed
        # (before, no session wants them and they are dropped): publish after its ready line
        source.wait_for(READY, stream="stderr", timeout=cpu.budget(20))
        rest.wait_for(READY, stream="stderr", timeout=cpu.budget(20))
        sent = [0]
        publisher = asyncio.ensure_future(publish(broker, n, rate, sent=sent))
        # killed mid-stream: once a third is published and the source has delivered some
        await wait_until(lambda: sent[0] >= n // 3 and some_delivered(), cpu.budget(20))
        source.proc.kill()
        source.proc.wait(10)
        # the source stays away while another sixth is published: those wait at the broker
        at_kill = sent[0]
        await wait_until(lambda: sent[0] >= min(n, at_kill + n // 6), cpu.budget(20))
        source2 = flow("source2", "readings")
        await asyncio.wait_for(publisher, cpu.budget(20))
        seen: list[int] = []
        async with asyncio.timeout(cpu.budget(40)):
            while len(set(seen)) < n:
                await asyncio.sleep(0.2)  # polling the sink's file
                seen = delivered()
        assert "Traceback" not in source2.errors()
    assert set(seen) == set(range(n))
    # a message is repeated only if the source died between logging its batch and the
    # broker getting the acknowledgement: at most one batch's worth
    assert len(seen) - n <= 256, f"{len(seen) - n} repeated"
