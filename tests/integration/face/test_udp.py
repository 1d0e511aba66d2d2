"""UDP faces over real loopback sockets: on-demand faces per peer, isolation of a bad peer,
persistent faces on the listener's socket with NDNLPv2 fragmentation, idle timeout."""

from __future__ import annotations

import contextlib
import os
import socket
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from forwarder.face.face_table import FaceTable
from forwarder.face.udp import UdpListener
from forwarder.face.uri import parse_face_uri
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import encode_lp
from icn.wire.name import from_uri
from tests.chaos.harness import CpuLoad
from tests.integration.face.util import DatagramPeer, datagram_peer, wait_until
from tests.unit.face.helpers import RecordingSink


@dataclass
class Node:
    table: FaceTable
    sink: RecordingSink
    counters: Counter[str]
    closed: list[int] = field(default_factory=list)
    port: int = 0

    @property
    def uri(self) -> str:
        return f"udp4://127.0.0.1:{self.port}"


async def make_node(listen: bool = True, **options: object) -> Node:
    counters: Counter[str] = Counter()
    sink = RecordingSink()
    node = Node(FaceTable(counters, sink=sink), sink, counters)
    node.table.on_face_closed = node.closed.append
    if listen:
        listener = await node.table.listen("udp4://127.0.0.1:0", **options)
        node.port = parse_face_uri(listener.local_uri).port
    return node


@pytest.fixture
async def nodes() -> AsyncIterator[list[Node]]:
    made: list[Node] = []
    yield made
    for node in made:
        node.table.close()


@pytest.fixture
async def peers() -> AsyncIterator[list[DatagramPeer]]:
    made: list[DatagramPeer] = []
    yield made
    for peer in made:
        peer.close()


def interest(name: str) -> bytes:
    return make_interest(from_uri(name), nonce=b"\x00\x01\x02\x03")


async def test_on_demand_face_per_peer(nodes: list[Node], peers: list[DatagramPeer]) -> None:
    fwd = await make_node()
    nodes.append(fwd)
    p1 = await datagram_peer("127.0.0.1", fwd.port)
    p2 = await datagram_peer("127.0.0.1", fwd.port)
    peers += [p1, p2]
    p1.send(interest("/one"))
    p2.send(interest("/two"))
    await wait_until(lambda: len(fwd.sink.interests) == 2)
    by_name = {wire: face_id for face_id, wire, _ in fwd.sink.interests}
    f1, f2 = by_name[interest("/one")], by_name[interest("/two")]
    assert f1 != f2 and len(fwd.table) == 2
    face1 = fwd.table[f1]
    assert face1.remote_uri == f"udp4://127.0.0.1:{p1.address[1]}"
    assert face1.local_uri == fwd.uri
    assert face1.is_local and face1.on_demand

    d1, d2 = make_data(from_uri("/one"), b"1"), make_data(from_uri("/two"), b"2")
    face1.send_data(d1)
    fwd.table[f2].send_data(d2, pit_token=b"tok")
    await wait_until(lambda: p1.received and p2.received)
    assert p1.received == [d1]  # bare: what python-ndn expects
    assert p2.received == [encode_lp(d2, pit_token=b"tok")]

    p1.send(interest("/one/again"))
    await wait_until(lambda: len(fwd.sink.interests) == 3)
    assert fwd.sink.interests[-1][0] == f1 and len(fwd.table) == 2


async def test_bad_peer_does_not_disturb_others(
    nodes: list[Node], peers: list[DatagramPeer]
) -> None:
    fwd = await make_node()
    nodes.append(fwd)
    bad = await datagram_peer("127.0.0.1", fwd.port)
    good = await datagram_peer("127.0.0.1", fwd.port)
    peers += [bad, good]
    bad.send(b"\xff\xfe garbage")  # not NDN at all: no face is made for it
    bad.send(interest("/ok")[:-2])  # truncated
    bad.send(encode_lp(make_data(from_uri("/d"), b""), nack_reason=T.NACK_NO_ROUTE))
    bad.send(b"\x64\x03\x50\x01")  # LpPacket whose fragment is 1 byte
    good.send(interest("/good"))
    await wait_until(lambda: len(fwd.sink.interests) == 1)
    await wait_until(lambda: fwd.counters["face.malformed"] == 2)
    assert fwd.counters["face.udp_junk"] == 1
    assert fwd.counters["face.nack_not_interest"] == 1
    assert fwd.closed == []
    bad.send(interest("/bad/recovered"))  # its face is still there and still works
    await wait_until(lambda: len(fwd.sink.interests) == 2)
    assert len(fwd.table) == 2


async def test_persistent_face_on_listener_socket_with_fragmentation(
    nodes: list[Node],
) -> None:
    a = await make_node(mtu=300)
    b = await make_node(mtu=300)
    nodes += [a, b]
    face = await b.table.connect(a.uri)
    assert face.remote_uri == a.uri and face.local_uri == b.uri and not face.on_demand
    assert await b.table.connect(a.uri) is face

    big = make_data(from_uri("/big"), bytes(range(256)) * 12)
    face.send_data(big, pit_token=b"pt", congestion_mark=1)
    await wait_until(lambda: a.sink.data)
    a_face_id, got, lp = a.sink.data[0]
    assert got == big and lp is not None and lp.pit_token == b"pt" and lp.congestion_mark == 1
    # a's on-demand face points at b's listening port, so its reply reaches b's persistent face
    assert a.table[a_face_id].remote_uri == b.uri
    a.table[a_face_id].send_interest(interest("/reply"))
    await wait_until(lambda: b.sink.interests)
    assert b.sink.interests[0][0] == face.face_id
    assert len(b.table) == 1


async def test_connect_without_listener_uses_own_socket(nodes: list[Node]) -> None:
    a = await make_node()
    c = await make_node(listen=False)
    nodes += [a, c]
    face = await c.table.connect(a.uri)
    assert face.remote_uri == a.uri and face.local_uri != a.uri
    face.send_interest(interest("/c"))
    await wait_until(lambda: a.sink.interests)
    a.table[a.sink.interests[0][0]].send_data(make_data(from_uri("/c"), b""))
    await wait_until(lambda: c.sink.data)
    assert c.sink.data[0][0] == face.face_id
    face.close()
    assert c.closed == [face.face_id]


async def test_icmp_error_does_not_close_a_face(nodes: list[Node]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    c = await make_node(listen=False)
    nodes.append(c)
    face = await c.table.connect(f"udp4://127.0.0.1:{dead_port}")
    for _ in range(3):
        face.send_interest(interest("/nobody"))
    await wait_until(lambda: c.counters["face.udp_error"] >= 1)
    assert not face.closed and c.closed == []


async def test_idle_on_demand_face_is_closed(
    nodes: list[Node], peers: list[DatagramPeer], cpu: CpuLoad
) -> None:
    fwd = await make_node(idle_timeout=0.1)
    nodes.append(fwd)
    peer = await datagram_peer("127.0.0.1", fwd.port)
    peers.append(peer)
    persistent = await fwd.table.connect(f"udp4://127.0.0.1:{peer.address[1]}")
    other = await datagram_peer("127.0.0.1", fwd.port)
    peers.append(other)
    other.send(interest("/idle"))
    await wait_until(lambda: fwd.sink.interests)
    idle_id = fwd.sink.interests[0][0]
    await wait_until(lambda: fwd.closed == [idle_id], timeout=cpu.budget(3.0))
    assert fwd.counters["face.idle_closed"] == 1
    assert not persistent.closed  # configured faces do not time out
    other.send(interest("/idle/back"))  # the peer comes back: a new face
    await wait_until(lambda: len(fwd.sink.interests) == 2)
    assert fwd.sink.interests[1][0] != idle_id


async def test_listener_close_closes_its_faces(
    nodes: list[Node], peers: list[DatagramPeer]
) -> None:
    fwd = await make_node()
    nodes.append(fwd)
    peer = await datagram_peer("127.0.0.1", fwd.port)
    peers.append(peer)
    peer.send(interest("/x"))
    await wait_until(lambda: fwd.sink.interests)
    (listener,) = fwd.table.listeners
    assert isinstance(listener, UdpListener) and len(listener.faces) == 1
    fwd.table.close()
    assert len(fwd.closed) == 1 and len(fwd.table) == 0


def _rmem_max() -> int:
    try:
        return int(Path("/proc/sys/net/core/rmem_max").read_text())
    except (OSError, ValueError):
        return 0


BURST = 64  # Data of 8 KiB: a collective's chunks from a few peers at once


@pytest.mark.skipif(
    _rmem_max() < 1 << 20 and os.geteuid() != 0,
    reason="net.core.rmem_max caps UDP receive buffers below 1 MiB for a user that is not root "
    "(Linux only): raise it with sysctl net.core.rmem_max=4194304",
)
async def test_a_burst_sent_while_the_loop_is_busy_is_not_dropped(
    nodes: list[Node], cpu: CpuLoad
) -> None:
    # Both sockets a forwarder has: a listener's (a) and a face's own (c).  The burst is sent
    # without yielding, so nothing reads it before it is all queued in the kernel: with Linux's
    # default 208 KiB receive queue about twenty of these datagrams fit, and every one dropped
    # cost an allreduce an Interest lifetime per round.
    a = await make_node()
    c = await make_node(listen=False)
    nodes += [a, c]
    c_face = await c.table.connect(a.uri)
    c_face.send_interest(interest("/hello"))
    await wait_until(lambda: a.sink.interests)
    a_face = a.table[a.sink.interests[0][0]]
    content = bytes(8192)
    within = cpu.budget(2.0)  # measured before the burst: it takes the CPU for a moment
    for i in range(BURST):
        a_face.send_data(make_data(from_uri(f"/chunk/{i}"), content))
        c_face.send_data(make_data(from_uri(f"/chunk/{i}"), content))
    with contextlib.suppress(TimeoutError):  # the counts below say what was lost
        await wait_until(lambda: len(a.sink.data) >= BURST and len(c.sink.data) >= BURST, within)
    assert (len(a.sink.data), len(c.sink.data)) == (BURST, BURST)
