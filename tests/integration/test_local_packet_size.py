"""Packet sizes against a real forwarder in this process: local faces (Unix socket, in-memory)
carry packets up to MAX_LOCAL_PACKET_SIZE, network faces (TCP, UDP) keep NDN's 8800 bytes unless
tcp_max_packet or udp_max_packet raise it.  A packet too large for the face it should leave by
is dropped and counted (face.drop_oversize); one received over the limit is dropped
(face.oversize), on a stream with its connection."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from apps.inproc import add_route, attach_endpoint
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.face.stream import MAX_FRAME_SIZE, MAX_LOCAL_FRAME_SIZE
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import data_content, fetch_segments
from icn.errors import ConfigError, InterestTimeout
from icn.wire import tlv_types as T
from icn.wire.encode import DataParts, make_data
from icn.wire.name import from_uri
from icn.wire.packet import InterestView
from tests.integration.face.util import StreamClient, datagram_peer, wait_until

MIB = 1 << 20
Reply = Callable[[bytes], None]


def data_of_size(name: bytes, size: int) -> bytes:
    """A Data packet named ``name`` whose wire is exactly ``size`` bytes."""
    probe = len(make_data(name, bytes(size), freshness=60_000))
    wire = make_data(name, os.urandom(2 * size - probe), freshness=60_000)
    assert len(wire) == size
    return wire


def sized_producer(served: list[bytes]) -> Callable[[InterestView, Reply], None]:
    """Answers ``/big/<size>/...`` with a Data of exactly <size> bytes."""

    def handler(iv: InterestView, reply: Reply) -> None:
        served.append(iv.name)
        size = int(iv.name[iv.name_ends[0] + 2 : iv.name_ends[1]])
        reply(data_of_size(iv.name, size))

    return handler


@pytest.fixture
async def fwd(workdir: Path) -> AsyncIterator[ForwarderDaemon]:
    listen = {"unix": str(workdir / "fwd.sock"), "tcp": ["127.0.0.1:0"], "udp": ["127.0.0.1:0"]}
    daemon = ForwarderDaemon(config_from_dict({"listen": listen}))
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()


@pytest.fixture
async def endpoints() -> AsyncIterator[list[Endpoint]]:
    opened: list[Endpoint] = []
    yield opened
    for ep in opened:
        ep.close()
        async with asyncio.timeout(2):
            await ep.wait_closed()


def uri_of(daemon: ForwarderDaemon, kind: str) -> str:
    return next(u for u in daemon.listen_uris if u.startswith(kind))


async def open_ep(daemon: ForwarderDaemon, kind: str, opened: list[Endpoint]) -> Endpoint:
    ep = await Endpoint.connect(uri_of(daemon, kind))
    opened.append(ep)
    return ep


async def test_unix_endpoints_exchange_1mib_and_the_largest_local_packet(
    fwd: ForwarderDaemon, endpoints: list[Endpoint]
) -> None:
    producer = await open_ep(fwd, "unix", endpoints)
    consumer = await open_ep(fwd, "unix", endpoints)
    served: list[bytes] = []
    await producer.serve("/big", sized_producer(served))
    one = await consumer.express(f"/big/{MIB}/a", timeout=10, retries=0)
    assert len(one.wire) == MIB and len(data_content(one)) > MIB - 100
    biggest = await consumer.express(f"/big/{T.MAX_LOCAL_PACKET_SIZE}/b", timeout=10, retries=0)
    assert len(biggest.wire) == T.MAX_LOCAL_PACKET_SIZE
    # again: the content store answers, and counts the bytes it served
    again = await consumer.express(f"/big/{MIB}/a", timeout=10, retries=0)
    assert again.wire == one.wire and len(served) == 2
    snap = fwd.snapshot()
    assert snap["fw.cs_hit"] == 1 and snap["fw.cs_hit_bytes"] == MIB
    assert snap.get("face.oversize", 0) == 0 and snap.get("face.drop_oversize", 0) == 0
    assert producer.counters["drop_send_queue_full"] == 0


class RecordingTransport:
    """The producer endpoint's socket transport, with what is handed to it recorded."""

    def __init__(self, inner: asyncio.WriteTransport) -> None:
        self.inner = inner
        self.lines: list[tuple[object, ...]] = []
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.inner.write(data)

    def writelines(self, parts: DataParts) -> None:
        self.lines.append(tuple(parts))
        self.inner.writelines(parts)

    def __getattr__(self, attr: str) -> object:
        return getattr(self.inner, attr)


async def test_a_published_object_leaves_the_producer_by_vectored_writes_of_its_own_buffer(
    fwd: ForwarderDaemon, endpoints: list[Endpoint]
) -> None:
    """Each segment goes to the socket as header, a view of the object, signature: the content
    is not copied into a packet first, and the consumer gets every byte."""
    producer = await open_ep(fwd, "unix", endpoints)
    consumer = await open_ep(fwd, "unix", endpoints)
    blob = os.urandom(4 * MIB + 123)
    obj = SegmentedObject(from_uri("/obj/v1"), blob, segment_size=MIB)
    await producer.serve(obj.prefix, obj.handler)
    spy = RecordingTransport(producer._transport)  # type: ignore[arg-type]
    producer._transport = spy
    got = await fetch_segments(consumer, obj.prefix, timeout=10)
    assert got == blob
    assert spy.writes == 0 and len(spy.lines) == obj.served == 5
    for head, content, tail in spy.lines:
        assert isinstance(content, memoryview) and content.obj is blob
        assert isinstance(head, bytes) and isinstance(tail, bytes) and len(tail) < 64


async def test_in_memory_endpoints_exchange_1mib_bursts_and_the_largest_local_packet() -> None:
    daemon = ForwarderDaemon(config_from_dict({"listen": {"udp": ["127.0.0.1:0"]}}))
    await daemon.start()
    producer, consumer = attach_endpoint(daemon), attach_endpoint(daemon)
    try:
        served: list[bytes] = []
        await producer.serve("/big", sized_producer(served))
        one = await consumer.express(f"/big/{MIB}/one", timeout=10, retries=0)
        assert len(one.wire) == MIB
        # a window of 1 MiB chunks answered in one burst, then the largest packet: none lost
        names = [f"/big/{MIB}/w{i}" for i in range(8)] + [f"/big/{T.MAX_LOCAL_PACKET_SIZE}/max"]
        got = await asyncio.gather(*(consumer.express(n, timeout=10, retries=0) for n in names))
        assert [len(d.wire) for d in got] == [MIB] * 8 + [T.MAX_LOCAL_PACKET_SIZE]
        assert daemon.counters["face.drop_send_queue_full"] == 0
        assert daemon.counters["face.drop_oversize"] == 0
    finally:
        producer.close()
        consumer.close()
        async with asyncio.timeout(2):
            await producer.wait_closed()
            await consumer.wait_closed()
        await daemon.stop()


async def test_unix_face_takes_the_largest_frame_and_rejects_a_larger_one(
    fwd: ForwarderDaemon,
) -> None:
    path = uri_of(fwd, "unix").removeprefix("unix://")
    good, bad = await StreamClient.unix(path), await StreamClient.unix(path)
    try:
        await good.write(data_of_size(from_uri("/unsolicited"), T.MAX_LOCAL_PACKET_SIZE))
        await wait_until(lambda: fwd.counters["fw.in_data"] == 1)
        # only the TLV header: the face refuses before reading the value
        header = bytes([T.DATA, 0xFE]) + (MAX_LOCAL_FRAME_SIZE - 5).to_bytes(4, "big")
        await bad.write(header)
        assert await bad.closed_by_peer()
        await wait_until(lambda: fwd.counters["face.oversize"] == 1)
        # the good connection is still up: the forwarder still reads from it
        await good.write(data_of_size(from_uri("/unsolicited/2"), 5000))
        await wait_until(lambda: fwd.counters["fw.in_data"] == 2)
    finally:
        good.close()
        bad.close()


@pytest.mark.parametrize("kind", ["tcp", "udp"])
async def test_network_face_carries_8800_and_drops_larger_packets_from_local_apps(
    kind: str, fwd: ForwarderDaemon, endpoints: list[Endpoint]
) -> None:
    producer = await open_ep(fwd, "unix", endpoints)
    consumer = await open_ep(fwd, kind, endpoints)
    await producer.serve("/big", sized_producer([]))
    fits = await consumer.express(f"/big/{T.MAX_PACKET_SIZE}/a", timeout=5, retries=0)
    assert len(fits.wire) == T.MAX_PACKET_SIZE
    for n, size in enumerate((T.MAX_PACKET_SIZE + 1, MIB)):
        with pytest.raises(InterestTimeout):
            await consumer.express(f"/big/{size}/b", lifetime_ms=300, retries=0)
        assert fwd.counters["face.drop_oversize"] == n + 1
    # the face is still up and in use
    again = await consumer.express(f"/big/{T.MAX_PACKET_SIZE}/c", timeout=5, retries=0)
    assert len(again.wire) == T.MAX_PACKET_SIZE
    assert fwd.counters["face.oversize"] == 0 and consumer.counters["connection_lost"] == 0


async def test_network_faces_still_refuse_larger_packets_received(fwd: ForwarderDaemon) -> None:
    port = int(uri_of(fwd, "tcp").rsplit(":", 1)[1])
    client = await StreamClient.tcp(port)
    try:
        await client.write(bytes([T.DATA, 0xFD]) + (MAX_FRAME_SIZE - 3).to_bytes(2, "big"))
        assert await client.closed_by_peer()
        await wait_until(lambda: fwd.counters["face.oversize"] == 1)
    finally:
        client.close()
    udp_port = int(uri_of(fwd, "udp").rsplit(":", 1)[1])
    peer = await datagram_peer("127.0.0.1", udp_port)
    try:
        peer.send(data_of_size(from_uri("/u/big"), MAX_FRAME_SIZE + 1))
        peer.send(data_of_size(from_uri("/u/fits"), T.MAX_PACKET_SIZE))
        await wait_until(lambda: fwd.counters["fw.in_data"] == 1)
        await wait_until(lambda: fwd.counters["face.oversize"] == 2)
    finally:
        peer.close()


async def test_tcp_faces_carry_larger_packets_where_tcp_max_packet_allows(
    workdir: Path, endpoints: list[Endpoint]
) -> None:
    """``tcp_max_packet`` (jumbo packets on TCP, every peer set alike): a Data of that size
    reaches a consumer over TCP, one over the new limit is still dropped and counted."""
    listen = {"unix": str(workdir / "jumbo.sock"), "tcp": ["127.0.0.1:0"]}
    daemon = ForwarderDaemon(config_from_dict({"listen": listen, "tcp_max_packet": 60000}))
    await daemon.start()
    try:
        producer = await open_ep(daemon, "unix", endpoints)
        consumer = await open_ep(daemon, "tcp", endpoints)
        await producer.serve("/big", sized_producer([]))
        got = await consumer.express("/big/60000/a", timeout=5, retries=0)
        assert len(got.wire) == 60000
        with pytest.raises(InterestTimeout):
            await consumer.express("/big/60001/b", lifetime_ms=300, retries=0)
        assert daemon.counters["face.drop_oversize"] == 1
    finally:
        await daemon.stop()


def test_tcp_max_packet_outside_its_range_names_the_field() -> None:
    for value in (T.MAX_PACKET_SIZE - 1, T.MAX_LOCAL_PACKET_SIZE + 1):
        with pytest.raises(ConfigError, match="tcp_max_packet"):
            config_from_dict({"tcp_max_packet": value})


async def test_udp_faces_carry_larger_packets_where_udp_max_packet_allows(
    workdir: Path, endpoints: list[Endpoint]
) -> None:
    """``udp_max_packet`` in two forwarders (a fabric set alike): a Data above the UDP face's
    MTU crosses as NDNLPv2 fragments and arrives whole, the consumer's path limit says the
    new size, and a Data over it is still dropped and counted."""
    from icn.dataplane.path_limit import path_packet_limit

    limit = 128 << 10
    daemons = []
    for name in ("near", "far"):
        listen = {"unix": str(workdir / f"{name}.sock"), "udp": ["127.0.0.1:0"]}
        daemon = ForwarderDaemon(config_from_dict({"listen": listen, "udp_max_packet": limit}))
        await daemon.start()
        daemons.append(daemon)
    near, far = daemons
    try:
        face = await near.faces.connect(uri_of(far, "udp"))
        add_route(near, "/big", face.face_id)
        producer = await open_ep(far, "unix", endpoints)
        consumer = await open_ep(near, "unix", endpoints)
        await producer.serve("/big", sized_producer([]))
        assert await path_packet_limit(consumer, from_uri("/big/f")) == limit
        got = await consumer.express("/big/100000/a", timeout=5, retries=0)
        assert len(got.wire) == 100_000
        assert face.link.stats.n_in_data == 1 and face.transport.in_bytes > 100_000
        with pytest.raises(InterestTimeout):
            await consumer.express(f"/big/{limit + 1}/b", lifetime_ms=300, retries=0)
        assert far.counters["face.drop_oversize"] == 1
    finally:
        for daemon in daemons:
            await daemon.stop()
