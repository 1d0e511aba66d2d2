"""Congestion marks end to end: forwarders in this process (in-memory faces) mark Data when a
face's send queue fills and carry marks from upstream to the consumer's PendingInterest; a Unix
stream face marks on its socket's write buffer."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apps.inproc import add_route, attach_endpoint, link
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.face.face import Face
from forwarder.face.face_table import FaceTable
from forwarder.face.link_service import DEFAULT_CONGESTION_THRESHOLD
from forwarder.face.memory import MemoryTransport, memory_pair
from icn.dataplane.endpoint import Endpoint, PendingInterest
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import encode_lp, parse_lp
from icn.wire.name import from_uri, to_uri
from icn.wire.packet import InterestView, parse_interest
from tests.integration.face.util import StreamClient, wait_until
from tests.unit.face.helpers import RecordingSink

BURST = 64
CHUNK = 64 * 1024
WAIT = 10.0


class Nodes:
    """Forwarders and endpoints of one test, all stopped at the end."""

    def __init__(self) -> None:
        self.daemons: list[ForwarderDaemon] = []
        self.endpoints: list[Endpoint] = []
        self.ports: list[MemoryTransport] = []

    async def daemon(self) -> ForwarderDaemon:
        d = ForwarderDaemon(config_from_dict({"listen": {}}))
        await d.start()
        self.daemons.append(d)
        return d

    def endpoint(
        self, d: ForwarderDaemon, congestion_threshold: int | None = None
    ) -> tuple[Endpoint, Face]:
        """An app on a new in-memory face of ``d``, whose forwarder end marks above
        ``congestion_threshold`` when one is given."""
        if congestion_threshold is None:
            ep = attach_endpoint(d)
            self.endpoints.append(ep)
            face = max(d.faces, key=lambda f: f.face_id)
            return ep, face
        fwd_end, app_end = memory_pair(d.counters, name="consumer")
        face = Face(fwd_end, congestion_threshold=congestion_threshold)
        d.faces.add(face)
        ep = Endpoint.over_port(app_end)
        self.endpoints.append(ep)
        return ep, face

    async def stop(self) -> None:
        for ep in self.endpoints:
            ep.close()
        for port in self.ports:
            port.close()
        for d in self.daemons:
            await d.stop()


@pytest.fixture
async def nodes() -> AsyncIterator[Nodes]:
    n = Nodes()
    try:
        yield n
    finally:
        await n.stop()


async def serve_chunks(producer: Endpoint, prefix: str) -> None:
    """Answer every Interest under ``prefix`` at once with CHUNK bytes of Data."""
    content = bytes(CHUNK)

    def handler(iv: InterestView, reply: object) -> None:
        producer.put(make_data(iv.name, content, freshness=1000))

    await producer.serve(prefix, handler)


async def burst(consumer: Endpoint, prefix: str) -> list[PendingInterest]:
    """BURST Interests at once; every one answered in time."""
    recs = [consumer.start(f"{prefix}/{i}", lifetime_ms=8000) for i in range(BURST)]
    try:
        async with asyncio.timeout(WAIT):
            for rec in recs:
                await rec.future
    finally:
        for rec in recs:
            consumer.drop(rec)
    return recs


async def test_burst_of_large_data_is_marked_at_the_consumers_face(nodes: Nodes) -> None:
    fwd = await nodes.daemon()
    producer, _ = nodes.endpoint(fwd)
    consumer, face = nodes.endpoint(fwd)
    await serve_chunks(producer, "/chunks")
    recs = await burst(consumer, "/chunks")
    marked = [rec for rec in recs if rec.congestion_mark]
    # 4 MiB reach the consumer's face in one go: its queue passes 64 KiB, and the first packet
    # sent then is marked; within one marking interval (100 ms) no other packet is
    assert 1 <= len(marked) < BURST // 2
    assert all(rec.congestion_mark == 1 for rec in marked)
    assert consumer.counters["congestion_marks"] == len(marked)
    assert face.stats.n_congestion_marked == len(marked)
    assert fwd.counters["face.congestion_marked"] >= len(marked)
    # the marked ones are not the first: the queue was short for those
    assert not recs[0].congestion_mark


async def test_small_data_are_not_marked(nodes: Nodes) -> None:
    fwd = await nodes.daemon()
    producer, _ = nodes.endpoint(fwd)
    consumer, _ = nodes.endpoint(fwd)

    def handler(iv: InterestView, reply: object) -> None:
        producer.put(make_data(iv.name, b"small"))

    await producer.serve("/small", handler)
    recs = await burst(consumer, "/small")  # 64 small Data stay far below 64 KiB
    assert [rec.congestion_mark for rec in recs] == [0] * BURST
    assert consumer.counters["congestion_marks"] == 0
    assert fwd.counters["face.congestion_marked"] == 0


def raw_producer(nodes: Nodes, d: ForwarderDaemon, prefix: str) -> None:
    """A producer on a bare in-memory port of ``d``: answers each Interest with an LpPacket
    whose Data carries CongestionMark=1 when its name ends in 'marked'."""
    fwd_end, app_end = memory_pair(d.counters, name="raw-producer")
    face_id = d.faces.add(Face(fwd_end))
    add_route(d, prefix, face_id)
    nodes.ports.append(app_end)

    def receive(wire: bytes) -> None:
        iv = parse_interest(wire if wire[0] == T.INTEREST else parse_lp(wire).fragment or b"")
        data = make_data(iv.name, b"payload", freshness=1000)
        marked = to_uri(iv.name).endswith("marked")
        app_end.send(encode_lp(data, congestion_mark=1) if marked else data)

    app_end.bind(receive, lambda: None)


async def test_mark_from_upstream_reaches_the_consumer_through_two_forwarders(
    nodes: Nodes,
) -> None:
    a, b = await nodes.daemon(), await nodes.daemon()
    a_to_b, _ = link(a, b)
    add_route(a, "/up", a_to_b)
    raw_producer(nodes, b, "/up")
    consumer, _ = nodes.endpoint(a)
    async with asyncio.timeout(WAIT):
        marked = consumer.start("/up/marked")
        plain = consumer.start("/up/plain")
        await marked.future
        await plain.future
    assert (marked.congestion_mark, plain.congestion_mark) == (1, 0)
    assert consumer.counters["congestion_marks"] == 1
    # carried, not made: neither forwarder had a queue to mark for
    assert a.counters["face.congestion_marked"] == b.counters["face.congestion_marked"] == 0


async def test_mark_made_by_the_upstream_forwarder_reaches_the_consumer(nodes: Nodes) -> None:
    """B's face towards A congests; A's face to the consumer never marks (its threshold is
    above the whole burst), so the marks the consumer sees are B's, carried by A."""
    a, b = await nodes.daemon(), await nodes.daemon()
    a_to_b, b_to_a = link(a, b)
    add_route(a, "/far", a_to_b)
    producer, _ = nodes.endpoint(b)
    await serve_chunks(producer, "/far")
    consumer, consumer_face = nodes.endpoint(a, congestion_threshold=BURST * CHUNK * 2)
    assert consumer_face.link.congestion_threshold > BURST * (CHUNK + 200)
    recs = await burst(consumer, "/far")
    marked = sum(1 for rec in recs if rec.congestion_mark == 1)
    assert marked >= 1
    assert consumer_face.stats.n_congestion_marked == 0
    assert a.counters["face.congestion_marked"] == 0
    b_face = b.faces.get(b_to_a)
    assert b_face is not None and b_face.stats.n_congestion_marked == marked


async def test_unix_face_marks_when_its_socket_buffer_fills(workdir: Path) -> None:
    """A client that stops reading: the Unix face's write buffer grows past 64 KiB and the
    next Data sent goes out marked; the client sees it when it reads again."""
    counters: Counter[str] = Counter()
    sink = RecordingSink()
    table = FaceTable(counters, sink=sink)
    listener = await table.listen(f"unix://{workdir}/fwd.sock")
    client = await StreamClient.unix(f"{workdir}/fwd.sock")
    try:
        client.writer.transport.pause_reading()  # type: ignore[attr-defined]
        client.writer.write(make_interest(from_uri("/u"), nonce=b"\x01\x02\x03\x04"))
        await wait_until(lambda: sink.interests)
        face = table[sink.interests[0][0]]
        assert face.transport.send_queue_capacity > 2 * DEFAULT_CONGESTION_THRESHOLD
        # one mark per minute: however slowly a loaded machine runs the loop below, one mark
        face.link.configure_congestion(DEFAULT_CONGESTION_THRESHOLD, 60.0)
        data = [make_data(from_uri(f"/u/{i}"), bytes(CHUNK)) for i in range(BURST)]
        queued_before = []
        for wire in data:
            queued_before.append(face.transport.send_queue_length())
            face.send_data(wire)
        assert counters["face.drop_send_queue_full"] == 0
        first = next(i for i, q in enumerate(queued_before) if q > DEFAULT_CONGESTION_THRESHOLD)
        client.writer.transport.resume_reading()  # type: ignore[attr-defined]
        got = [await client.next_packet() for _ in data]
        marks = [parse_lp(w).congestion_mark if w[0] == T.LP_PACKET else 0 for w in got]
        assert [w if w[0] != T.LP_PACKET else parse_lp(w).fragment for w in got] == data
        assert marks == [0] * first + [1] + [0] * (BURST - first - 1)
        assert counters["face.congestion_marked"] == 1
    finally:
        client.close()
        listener.close()
        table.close()
