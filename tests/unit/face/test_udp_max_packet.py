"""UDP faces with a raised largest packet (the daemon's ``udp_max_packet``), between two UDP
listeners whose sockets are fakes handing datagrams to each other (no sockets): a packet up to
the face MTU crosses as one datagram, a larger one as NDNLPv2 fragments of at most the MTU,
reassembled whole at the other end; NDN's 8800 stays the default."""

from __future__ import annotations

from collections import Counter
from typing import Any

from forwarder.face.face import Face
from forwarder.face.udp import DEFAULT_MTU, UdpListener
from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.lp import parse_lp
from icn.wire.name import from_uri
from tests.unit.face.helpers import RecordingSink

NAME = from_uri("/jumbo/x")
LIMIT = 128 << 10
A, B = ("10.0.0.1", 6363), ("10.0.0.2", 6363)


def data_of_size(size: int) -> bytes:
    probe = len(make_data(NAME, bytes(size)))
    wire = make_data(NAME, bytes(2 * size - probe))
    assert len(wire) == size
    return wire


class FakeDatagrams:
    """A listener's socket: ``sendto`` records the datagram and hands it to the peer listener,
    as if it came from this listener's address."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.peer: UdpListener | None = None
        self.sent: list[bytes] = []

    def get_write_buffer_size(self) -> int:
        return 0

    def sendto(self, data: bytes, addr: Any) -> None:
        self.sent.append(bytes(data))
        assert self.peer is not None
        self.peer.datagram_received(bytes(data), self.addr)


def listener(
    addr: tuple[str, int], counters: Counter[str], **options: Any
) -> tuple[UdpListener, FakeDatagrams]:
    faces: list[Face] = []
    lst = UdpListener(
        f"udp4://{addr[0]}:{addr[1]}", counters=counters, on_face=faces.append, **options
    )
    dgram = FakeDatagrams(addr)
    lst.connection_made(dgram)  # type: ignore[arg-type]
    return lst, dgram


async def pair(**options: Any) -> tuple[Face, FakeDatagrams, RecordingSink, Counter[str]]:
    """A persistent face from listener a to b; b's on-demand face for a gets what it sends."""
    counters: Counter[str] = Counter()
    (a, dgram_a), (b, dgram_b) = listener(A, counters, **options), listener(B, counters, **options)
    dgram_a.peer, dgram_b.peer = b, a
    face = await a.connect(f"udp4://{B[0]}:{B[1]}")
    sink = RecordingSink()
    # b's face for a appears with the first datagram: give every face b makes the sink
    on_face = b.on_face

    def wired(f: Face) -> None:
        f.sink = sink
        on_face(f)

    b.on_face = wired
    return face, dgram_a, sink, counters


async def test_default_udp_face_keeps_ndn_packet_size() -> None:
    face, sent, _sink, counters = await pair()
    assert face.transport.max_packet == T.MAX_PACKET_SIZE
    face.send_data(data_of_size(T.MAX_PACKET_SIZE + 1))
    assert sent.sent == [] and counters["face.drop_oversize"] == 1


async def test_raised_limit_sends_a_packet_up_to_the_mtu_as_one_datagram() -> None:
    face, sent, sink, counters = await pair(max_packet=LIMIT)
    assert face.transport.max_packet == LIMIT and face.transport.mtu == DEFAULT_MTU
    wire = data_of_size(60_000)
    face.send_data(wire)
    assert sent.sent == [wire]  # bare, whole
    assert [d[1] for d in sink.data] == [wire]
    assert counters["face.drop_oversize"] == 0 and counters["face.oversize"] == 0


async def test_raised_limit_sends_a_larger_packet_as_fragments_reassembled_whole() -> None:
    face, sent, sink, counters = await pair(max_packet=LIMIT)
    for size in (66_000, 100_000, LIMIT):  # (a 64 KiB payload: above the face MTU too)
        sent.sent.clear()
        sink.data.clear()
        wire = data_of_size(size)
        face.send_data(wire)
        assert len(sent.sent) >= 2 and all(len(d) <= DEFAULT_MTU for d in sent.sent)
        lps = [parse_lp(d) for d in sent.sent]
        assert [lp.frag_index for lp in lps] == list(range(len(lps)))
        assert {lp.frag_count for lp in lps} == {len(lps)}
        assert [d[1] for d in sink.data] == [wire]
    face.send_data(data_of_size(LIMIT + 1))  # over the limit: dropped, not fragmented
    assert counters["face.drop_oversize"] == 1 and counters["face.oversize"] == 0
