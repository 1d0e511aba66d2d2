"""MQTT source and sink against a real mosquitto that each test starts on a free port (and stops
by its PID): QoS 1 without loss and in order, manual acknowledgement across a close and a crash,
persistent sessions (also across a broker restart), reconnection, push-back, clear errors."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apps import mqtt_broker
from apps.mqtt_broker import NOT_INSTALLED, MosquittoBroker, find_mosquitto, free_port
from compute.stream.mqtt_io import MqttMessage, MqttSink, MqttSource, MqttUnavailable
from icn.errors import ConfigError
from tests.chaos.harness import CpuLoad
from tests.needs import needs
from tests.waiting import wait_until

pytestmark = needs(find_mosquitto() is not None, NOT_INSTALLED)

TOPIC = "sensors/a"


@pytest.fixture
async def broker() -> AsyncIterator[MosquittoBroker]:
    async with MosquittoBroker() as b:
        yield b


def payloads(n: int, start: int = 0) -> list[bytes]:
    return [b"m%05d" % i for i in range(start, start + n)]


async def collect(
    source: MqttSource, want: set[bytes], within: float, ack: bool = True
) -> list[MqttMessage]:
    """Messages until every payload of ``want`` came (acknowledging each batch)."""
    got: list[MqttMessage] = []
    missing = set(want)
    async with asyncio.timeout(within):
        while missing:
            batch = await source.get(1000, 0.5)
            got += batch
            missing -= {m.payload for m in batch}
            if ack:
                source.ack(batch)
    return got


async def drain(source: MqttSource, quiet: float = 0.3) -> list[MqttMessage]:
    """What else comes within ``quiet`` seconds of the last message."""
    got: list[MqttMessage] = []
    while batch := await source.get(1000, quiet):
        got += batch
    return got


def first_seen(messages: list[MqttMessage]) -> list[bytes]:
    seen: dict[bytes, None] = {}
    for m in messages:
        seen.setdefault(m.payload, None)
    return list(seen)


async def publish_all(sink: MqttSink, items: list[bytes], topic: str = TOPIC) -> None:
    for p in items:
        await sink.publish(topic, p)


async def publish_concurrently(sink: MqttSink, items: list[bytes], at_once: int) -> None:
    for i in range(0, len(items), at_once):
        await asyncio.gather(*(sink.publish(TOPIC, p) for p in items[i : i + at_once]))


async def test_qos1_5000_messages_none_lost_in_order(broker: MosquittoBroker) -> None:
    # max_buffered well below the count: the source pauses and resumes its socket many times
    source = MqttSource(broker.host, broker.port, TOPIC, client_id="order", max_buffered=500)
    # publishes 400 at a time, 100 of them in flight at once: order is call order
    sink = MqttSink(broker.host, broker.port, client_id="order-pub", max_in_flight=100)
    await source.start()
    await sink.start()
    try:
        sent = payloads(5000)
        publisher = asyncio.create_task(publish_concurrently(sink, sent, 400))
        # a consumer that starts late: 500 wait and the socket pauses
        await wait_until(lambda: source.counters["pauses"] >= 1, 10)
        got = await collect(source, set(sent), within=20)
        await publisher
        got += await drain(source, 0.2)
        assert first_seen(got) == sent
        assert [m.payload for m in got] == sent  # no fault, so no repeat either
        assert all(m.qos == 1 and m.topic == TOPIC for m in got)
        assert sink.counters["published"] == 5000
        assert source.counters["acked"] == 5000
        assert source.counters["pauses"] >= 1
        assert source.buffered == 0 and source.unacked == 0
    finally:
        await source.close()
        await sink.close()


async def test_close_without_ack_leaves_messages_with_the_broker(broker: MosquittoBroker) -> None:
    sink = MqttSink(broker.host, broker.port, client_id="pub")
    await sink.start()
    a = MqttSource(broker.host, broker.port, TOPIC, client_id="X")
    await a.start()
    sent = payloads(100)
    await publish_all(sink, sent)
    got = await collect(a, set(sent), within=5, ack=False)
    assert [m.payload for m in got] == sent
    a.ack(got[:30])  # durably taken: the broker may forget these
    await a.sync()  # the broker has handled the PUBACKs
    await a.close()  # the other 70 were never acknowledged: close must not do it
    assert a.counters["acked"] == 30

    b = MqttSource(broker.host, broker.port, TOPIC, client_id="X")
    await b.start()
    try:
        again = await collect(b, set(sent[30:]), within=5)
        again += await drain(b)
        assert [m.payload for m in again] == sent[30:]
    finally:
        await b.close()
        await sink.close()


CRASHING_SOURCE = """
import asyncio, json, sys
from compute.stream.mqtt_io import MqttSource

async def main(port, n):
    source = MqttSource("127.0.0.1", port, "sensors/a", client_id="X")
    await source.start()
    got = []
    async with asyncio.timeout(10):
        while len(got) < n:
            got += await source.get(n - len(got), 1.0)
    source.ack(got[: n // 2])
    await source.sync()  # the broker has handled the PUBACKs
    print(json.dumps([m.payload.decode() for m in got]), flush=True)
    await asyncio.sleep(60)  # parked until the test kills it, before anything else is acked

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


@pytest.mark.fault
async def test_crash_before_ack_means_redelivery(broker: MosquittoBroker, cpu: CpuLoad) -> None:
    sink = MqttSink(broker.host, broker.port, client_id="pub")
    await sink.start()
    # the subscription exists before anything is published
    first = MqttSource(broker.host, broker.port, TOPIC, client_id="X")
    await first.start()
    await first.close()
    sent = payloads(200)
    await publish_all(sink, sent)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_SOURCE,
        str(broker.port),
        "200",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        assert child.stdout is not None and child.stderr is not None
        async with asyncio.timeout(cpu.budget(15)):
            line = await child.stdout.readline()
        assert line, (await child.stderr.read()).decode()[-2000:]
        assert [p.encode() for p in json.loads(line)] == sent
        os.kill(child.pid, signal.SIGKILL)  # the crash
        async with asyncio.timeout(5):
            await child.wait()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()

    b = MqttSource(broker.host, broker.port, TOPIC, client_id="X")
    await b.start()
    try:
        again = await collect(b, set(sent[100:]), within=cpu.budget(5))
        again += await drain(b)
        assert [m.payload for m in again] == sent[100:]  # the acknowledged half is gone
        assert b.counters["redelivered"] >= 1  # sent to the crashed process before
    finally:
        await b.close()
        await sink.close()


@pytest.mark.fault
async def test_persistent_session_keeps_messages_while_away(
    broker: MosquittoBroker, cpu: CpuLoad
) -> None:
    sink = MqttSink(broker.host, broker.port, client_id="pub")
    await sink.start()
    source = MqttSource(broker.host, broker.port, TOPIC, client_id="away")
    await source.start()  # subscribes once
    await source.close()
    try:
        away = payloads(50)
        await publish_all(sink, away)
        source = MqttSource(broker.host, broker.port, TOPIC, client_id="away")
        await source.start()
        got = await collect(source, set(away), within=cpu.budget(5))
        assert [m.payload for m in got] == away
        await source.close()

        # and across a broker restart: the session and its queue are in the persistence file
        later = payloads(50, start=50)
        await publish_all(sink, later)
        await sink.close()
        await broker.restart()
        source = MqttSource(broker.host, broker.port, TOPIC, client_id="away")
        await source.start()
        got = await collect(source, set(later), within=cpu.budget(5))
        got += await drain(source)
        assert [m.payload for m in got] == later
    finally:
        await source.close()
        await sink.close()


@pytest.mark.fault
async def test_source_and_sink_reconnect_across_a_broker_restart(
    broker: MosquittoBroker, cpu: CpuLoad
) -> None:
    source = MqttSource(broker.host, broker.port, TOPIC, client_id="rc", max_backoff=0.5)
    sink = MqttSink(broker.host, broker.port, client_id="rc-pub", max_backoff=0.5)
    await source.start()
    await sink.start()
    try:
        sent = payloads(400)
        publisher = asyncio.create_task(publish_all(sink, sent))
        got: list[MqttMessage] = []
        async with asyncio.timeout(cpu.budget(5)):
            while len(got) < 100:
                batch = await source.get(1000, 0.5)
                got += batch
                source.ack(batch)
        await broker.restart()  # while the sink publishes and the source reads
        got += await collect(source, set(sent) - {m.payload for m in got}, within=cpu.budget(15))
        await asyncio.wait_for(publisher, cpu.budget(15))
        got += await drain(source)
        assert first_seen(got) == sent  # every message, in order, repeats allowed
        assert source.counters["reconnects"] >= 1
        assert sink.counters["reconnects"] >= 1
        assert source.connected and sink.connected
    finally:
        await source.close()
        await sink.close()


@pytest.mark.fault
async def test_messages_unread_at_a_drop_come_once_more_from_the_broker(
    broker: MosquittoBroker, cpu: CpuLoad
) -> None:
    source = MqttSource(broker.host, broker.port, TOPIC, client_id="unread", max_backoff=0.2)
    sink = MqttSink(broker.host, broker.port, client_id="unread-pub")
    await source.start()
    await sink.start()
    try:
        sent = payloads(50)
        await publish_all(sink, sent)
        await wait_until(lambda: source.buffered >= 50, cpu.budget(5))
        await sink.close()
        await broker.restart()  # 50 read from the socket, none taken: all go back to the broker
        await wait_until(lambda: source.counters["reconnects"] >= 1, cpu.budget(10))
        got = await collect(source, set(sent), within=cpu.budget(5))
        got += await drain(source)
        # the copies read over the lost connection are dropped: the broker's come, once
        assert [m.payload for m in got] == sent
        assert source.counters["stale_dropped"] == 50
        assert source.counters["acked"] == 50
    finally:
        await source.close()
        await sink.close()


async def test_source_stops_reading_when_max_buffered_wait(broker: MosquittoBroker) -> None:
    source = MqttSource(broker.host, broker.port, TOPIC, client_id="slow", max_buffered=20)
    sink = MqttSink(broker.host, broker.port, client_id="slow-pub")
    await source.start()
    await sink.start()
    try:
        sent = payloads(300)
        await publish_all(sink, sent)
        got: list[MqttMessage] = []
        for _ in range(3):
            # acknowledgements let the broker send more, until the buffer is full again and
            # the socket pauses; the buffer stays bounded
            await wait_until(lambda: source.buffered >= 20, 10)
            assert source.buffered == 20
            batch = await source.get(5, 1.0)
            source.ack(batch)
            got += batch
        assert source.counters["pauses"] >= 2
        got += await collect(source, set(sent) - {m.payload for m in got}, within=10)
        assert [m.payload for m in got] == sent
    finally:
        await source.close()
        await sink.close()


async def test_no_broker_at_start_is_a_clear_error(cpu: CpuLoad) -> None:
    port = free_port()
    cpu.budget(3)  # the load before the timed part counts too (the larger is kept)
    t0 = time.monotonic()
    source = MqttSource("127.0.0.1", port, TOPIC, client_id="x", connect_timeout=1.0)
    with pytest.raises(MqttUnavailable, match=rf"127\.0\.0\.1:{port} within 1 s.*start one"):
        await source.start()
    sink = MqttSink("127.0.0.1", port, client_id="y", connect_timeout=1.0)
    with pytest.raises(MqttUnavailable, match=rf"127\.0\.0\.1:{port}.*check the host and port"):
        await sink.start()
    # each gave up after its 1 s connect timeout, not much later (3 s more on a quiet machine)
    assert time.monotonic() - t0 < 2.0 + cpu.budget(3)
    assert source.counters["connect_failures"] >= 2  # it retried within the bound


@pytest.mark.fault
async def test_sink_gives_up_after_retry_for_when_the_broker_is_gone(
    broker: MosquittoBroker, cpu: CpuLoad
) -> None:
    sink = MqttSink(broker.host, broker.port, client_id="gone", retry_for=1.0, max_backoff=0.2)
    await sink.start()
    try:
        await sink.publish(TOPIC, b"before")
        await broker.stop()
        t0 = time.monotonic()
        with pytest.raises(MqttUnavailable, match=rf"127\.0\.0\.1:{broker.port}"):
            await sink.publish(TOPIC, b"after")
        assert time.monotonic() - t0 < 1.0 + cpu.budget(4)  # retry_for, then one last attempt
        assert sink.counters["published"] == 1
        assert sink.counters["connect_failures"] >= 2  # it tried again within retry_for
    finally:
        await sink.close()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"port": 0}, "port=0"),
        ({"port": 70000}, "port=70000"),
        ({"host": ""}, "host=''"),
        ({"client_id": ""}, "client_id=''"),
        ({"qos": 2}, "qos=2"),
        ({"max_buffered": 0}, "max_buffered=0"),
        ({"topic": ""}, "topic=''"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"host": "127.0.0.1", "port": 1883, "topic": TOPIC}
    args["client_id"] = "x"
    args.update(kwargs)
    with pytest.raises(ConfigError, match=field):
        MqttSource(**args)  # type: ignore[arg-type]


async def test_broker_stops_by_pid_and_removes_its_dir() -> None:
    broker = MosquittoBroker()
    await broker.start()
    pid, workdir, port = broker.pid, broker.workdir, broker.port
    assert workdir is not None and (workdir / "mosquitto.conf").exists()
    assert broker.url == f"mqtt://127.0.0.1:{port}"
    await broker.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not workdir.exists()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    await broker.stop()  # idempotent


async def test_broker_without_mosquitto_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mqtt_broker, "find_mosquitto", lambda: None)
    with pytest.raises(FileNotFoundError, match=r"run scripts/bootstrap\.sh as root"):
        await MosquittoBroker().start()
