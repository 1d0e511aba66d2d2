"""TCP and Unix stream faces over real sockets: framing across and within writes, a bad peer
closing only its own face, outgoing connections, bounded send buffers, a python-ndn client."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ndn.encoding import InterestParam, MetaInfo, Name
from ndn.encoding import make_data as ndn_make_data
from ndn.encoding import make_interest as ndn_make_interest
from ndn.encoding import parse_data as ndn_parse_data
from ndn.transport.stream_face import UnixFace

from forwarder.face.face_table import FaceTable
from forwarder.face.stream import MAX_FRAME_SIZE
from forwarder.face.uri import parse_face_uri
from icn.errors import FaceError
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import encode_lp, encode_nack, parse_lp
from icn.wire.name import from_uri
from icn.wire.packet import parse_interest
from tests.integration.face.util import StreamClient, wait_until
from tests.unit.face.helpers import RecordingSink


@dataclass
class Node:
    table: FaceTable
    sink: RecordingSink
    counters: Counter[str]
    closed: list[int] = field(default_factory=list)
    uri: str = ""


async def make_node(listen: str | None, **options: object) -> Node:
    counters: Counter[str] = Counter()
    sink = RecordingSink()
    node = Node(FaceTable(counters, sink=sink), sink, counters)
    node.table.on_face_closed = node.closed.append
    if listen is not None:
        listener = await node.table.listen(listen, **options)
        node.uri = listener.local_uri
    return node


@pytest.fixture
async def cleanup() -> AsyncIterator[list[Node | StreamClient]]:
    things: list[Node | StreamClient] = []
    yield things
    for thing in things:
        if isinstance(thing, Node):
            thing.table.close()
        else:
            thing.close()


def interest(name: str) -> bytes:
    return make_interest(from_uri(name), nonce=b"\x0a\x0b\x0c\x0d")


async def connect(node: Node) -> StreamClient:
    uri = parse_face_uri(node.uri)
    if uri.scheme == "unix":
        return await StreamClient.unix(uri.path)
    return await StreamClient.tcp(uri.port)


@pytest.mark.parametrize("kind", ["tcp", "unix"])
async def test_framing_across_and_within_writes(
    kind: str, workdir: Path, cleanup: list[Node | StreamClient]
) -> None:
    listen = "tcp4://127.0.0.1:0" if kind == "tcp" else f"unix://{workdir}/fwd.sock"
    fwd = await make_node(listen)
    cleanup.append(fwd)
    client = await connect(fwd)
    cleanup.append(client)

    i1, i2 = interest("/split/one"), interest("/batch/two")
    d1 = make_data(from_uri("/batch/data"), b"x" * 5000)
    lp3 = encode_lp(interest("/batch/three"), pit_token=b"\x01\x02")
    # one packet over three writes (the header itself cut in two), then three in one write
    # (the pauses are the thing tested: separate reads on the forwarder's side)
    await client.write(i1[:1])
    await asyncio.sleep(0.01)
    await client.write(i1[1:7])
    await asyncio.sleep(0.01)
    await client.write(i1[7:])
    await client.write(i2 + d1 + lp3)
    await wait_until(lambda: fwd.sink.total == 4)
    assert [w for _, w, _ in fwd.sink.interests] == [i1, i2, interest("/batch/three")]
    assert fwd.sink.data[0][1] == d1
    assert fwd.sink.interests[2][2] is not None
    assert fwd.sink.interests[2][2].pit_token == b"\x01\x02"

    face = fwd.table[fwd.sink.interests[0][0]]
    assert face.is_local and face.on_demand
    if kind == "unix":
        assert face.local_uri == listen and face.remote_uri.startswith("fd://")
    else:
        assert face.remote_uri.startswith("tcp4://127.0.0.1:")

    reply = make_data(from_uri("/batch/three"), b"y" * 7000)
    face.send_data(reply, pit_token=b"\x01\x02")
    face.send_nack(i2, T.NACK_NO_ROUTE)
    face.send_data(d1)
    assert await client.next_packet() == encode_lp(reply, pit_token=b"\x01\x02")
    assert await client.next_packet() == encode_nack(i2, T.NACK_NO_ROUTE)
    assert await client.next_packet() == d1

    client.close()
    await wait_until(lambda: fwd.closed == [face.face_id])
    if kind == "unix":
        fwd.table.close()
        assert not os.path.exists(f"{workdir}/fwd.sock")


@pytest.mark.parametrize(
    ("garbage", "counter"),
    [
        (b"\x05\xfd\x00\x01", "face.bad_tlv"),  # non-minimal TLV-LENGTH: a bad header
        (b"\x07\x02\x08\x00", "face.unknown_type"),  # a Name at top level
        (b"\x06\xfd" + MAX_FRAME_SIZE.to_bytes(2, "big"), "face.oversize"),
    ],
    ids=["bad_header", "bad_type", "oversize"],
)
async def test_bad_stream_closes_only_that_face(
    garbage: bytes, counter: str, cleanup: list[Node | StreamClient]
) -> None:
    fwd = await make_node("tcp4://127.0.0.1:0")
    cleanup.append(fwd)
    bad = await connect(fwd)
    good = await connect(fwd)
    cleanup += [bad, good]
    await good.write(interest("/good/1"))
    await wait_until(lambda: len(fwd.sink.interests) == 1)
    good_id = fwd.sink.interests[0][0]

    await bad.write(interest("/bad/first") + garbage + interest("/bad/never"))
    assert await bad.closed_by_peer()
    await wait_until(lambda: len(fwd.closed) == 1)
    assert fwd.counters[counter] == 1
    assert good_id not in fwd.closed and len(fwd.table) == 1
    assert [w for _, w, _ in fwd.sink.interests][1] == interest("/bad/first")
    assert all(w != interest("/bad/never") for _, w, _ in fwd.sink.interests)

    await good.write(interest("/good/2"))
    await wait_until(lambda: len(fwd.sink.interests) == 3)
    data = make_data(from_uri("/good/2"), b"ok")
    fwd.table[good_id].send_data(data)
    assert await good.next_packet() == data


async def test_outgoing_tcp_face(cleanup: list[Node | StreamClient]) -> None:
    a = await make_node("tcp4://127.0.0.1:0")
    b = await make_node(None)
    cleanup += [a, b]
    face = await b.table.connect(a.uri)
    assert face.remote_uri == a.uri and not face.on_demand and face.is_local
    assert await b.table.connect(a.uri) is face
    face.send_interest(interest("/out"))
    await wait_until(lambda: a.sink.interests)
    a_id = a.sink.interests[0][0]
    big = make_data(from_uri("/out"), b"z" * 8000)
    a.table[a_id].send_data(big, congestion_mark=1)
    await wait_until(lambda: b.sink.data)
    assert b.sink.data[0][1] == big and b.sink.data[0][0] == face.face_id
    lp = b.sink.data[0][2]
    assert lp is not None and lp.congestion_mark == 1
    face.close()
    assert b.closed == [face.face_id]
    await wait_until(lambda: a.closed == [a_id])  # the peer sees the disconnect


async def test_connect_errors_are_face_errors(workdir: Path) -> None:
    node = await make_node(None)
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(FaceError, match="cannot connect"):
        await node.table.connect(f"tcp4://127.0.0.1:{port}")
    with pytest.raises(FaceError, match="cannot connect"):
        await node.table.connect(f"unix://{workdir}/nobody.sock")
    assert len(node.table) == 0


async def test_send_buffer_is_bounded(cleanup: list[Node | StreamClient]) -> None:
    fwd = await make_node("tcp4://127.0.0.1:0", send_limit=64 * 1024)
    client = await connect(fwd)  # never reads
    cleanup += [fwd, client]
    await client.write(interest("/slow"))
    await wait_until(lambda: fwd.sink.interests)
    face = fwd.table[fwd.sink.interests[0][0]]
    data = make_data(from_uri("/slow"), b"d" * 8000)
    for _ in range(3000):  # 24 MB in one go: more than the kernel buffers will take
        face.send_data(data)
    assert fwd.counters["face.drop_send_queue_full"] > 0
    assert not face.closed


async def test_python_ndn_unix_client(workdir: Path, cleanup: list[Node | StreamClient]) -> None:
    """python-ndn's own UnixFace: bare packets in, and what we send back parses in python-ndn."""
    path = f"{workdir}/nfd.sock"
    fwd = await make_node(f"unix://{path}")
    cleanup.append(fwd)
    received: list[tuple[int, bytes]] = []

    async def callback(typ: int, packet: bytes) -> None:
        received.append((typ, bytes(packet)))

    client = UnixFace(path)
    await asyncio.wait_for(client.open(), 5)
    client.callback = callback
    runner = asyncio.ensure_future(client.run())
    try:
        wire = bytes(ndn_make_interest("/app/hello", InterestParam(lifetime=4000, nonce=7)))
        client.send(wire)
        client.send(bytes(ndn_make_data("/app/pushed", MetaInfo(), b"content")))
        await wait_until(lambda: fwd.sink.total == 2)
        face_id, got, lp = fwd.sink.interests[0]
        assert got == wire and lp is None
        assert parse_interest(got).name == from_uri("/app/hello")
        face = fwd.table[face_id]
        assert face.is_local

        face.send_data(make_data(from_uri("/app/hello"), b"world"))
        face.send_nack(wire, T.NACK_NO_ROUTE)
        await wait_until(lambda: len(received) == 2)
        (t1, data), (t2, nack) = received
        assert t1 == T.DATA and t2 == T.LP_PACKET
        name, _, content, _ = ndn_parse_data(data)
        assert Name.to_str(name) == "/app/hello" and bytes(content or b"") == b"world"
        assert parse_lp(nack).nack_reason == T.NACK_NO_ROUTE
    finally:
        client.shutdown()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    await wait_until(lambda: len(fwd.closed) == 1)
