"""Stream framing without sockets: a StreamTransport fed through a fake asyncio transport."""

from __future__ import annotations

from collections import Counter
from typing import Any

from forwarder.face.face import Face
from forwarder.face.stream import MAX_FRAME_SIZE, StreamTransport
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import encode_lp
from icn.wire.name import from_uri
from tests.unit.face.helpers import RecordingSink

INTEREST = make_interest(from_uri("/a/b"), nonce=b"1234")
DATA = make_data(from_uri("/a/b"), b"x" * 300)
LP = encode_lp(DATA, pit_token=b"tk")


class FakeSock:
    """Just what StreamTransport uses of an asyncio.Transport."""

    def __init__(self, peer: tuple[str, int] = ("127.0.0.1", 40000)) -> None:
        self.written: list[bytes] = []
        self.buffered = 0
        self.closed = False
        self.aborted = False
        self.extra: dict[str, Any] = {"sockname": ("127.0.0.1", 6363), "peername": peer}

    def get_extra_info(self, key: str, default: Any = None) -> Any:
        return self.extra.get(key, default)

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


class Conn:
    def __init__(self, peer: tuple[str, int] = ("127.0.0.1", 40000), **kw: Any) -> None:
        self.counters: Counter[str] = Counter()
        self.sink = RecordingSink()
        self.closed: list[Face] = []
        self.faces: list[Face] = []
        self.transport = StreamTransport(
            counters=self.counters,
            unix=False,
            on_demand=True,
            on_connected=self._connected,
            **kw,
        )
        self.sock = FakeSock(peer)
        self.transport.connection_made(self.sock)  # type: ignore[arg-type]

    def _connected(self, transport: StreamTransport) -> None:
        face = Face(transport)
        face.sink = self.sink
        face.on_closed = self.closed.append
        self.faces.append(face)

    @property
    def face(self) -> Face:
        return self.faces[0]

    def feed(self, data: bytes) -> None:
        self.transport.data_received(data)


def test_uris_and_scope_from_the_socket() -> None:
    conn = Conn()
    assert conn.face.local_uri == "tcp4://127.0.0.1:6363"
    assert conn.face.remote_uri == "tcp4://127.0.0.1:40000"
    assert conn.face.is_local and conn.face.on_demand
    assert not Conn(peer=("192.0.2.7", 5)).face.is_local


def test_byte_by_byte() -> None:
    conn = Conn()
    for byte in INTEREST + LP:
        conn.feed(bytes([byte]))
    assert [w for _, w, _ in conn.sink.interests] == [INTEREST]
    assert conn.sink.data[0][1] == DATA and conn.sink.data[0][2] is not None


def test_many_packets_in_one_chunk_and_split_tail() -> None:
    conn = Conn()
    stream = INTEREST * 3 + DATA + LP + INTEREST
    conn.feed(stream[:-5])
    assert len(conn.sink.interests) == 3 and len(conn.sink.data) == 2
    conn.feed(stream[-5:])
    assert len(conn.sink.interests) == 4
    assert conn.transport.in_bytes == len(stream)


def test_bad_tlv_header_closes_the_face() -> None:
    conn = Conn()
    conn.feed(INTEREST + b"\x05\xfd\x00\x01")  # non-minimal length: bad header
    assert len(conn.sink.interests) == 1
    assert conn.counters["face.bad_tlv"] == 1
    assert conn.closed == [conn.face] and conn.sock.aborted
    conn.feed(INTEREST)  # asyncio may still hand over data: ignored
    assert len(conn.sink.interests) == 1


def test_unknown_type_closes_the_face() -> None:
    conn = Conn()
    conn.feed(b"\x07\x01\x00")
    assert conn.counters["face.unknown_type"] == 1 and conn.closed


def test_oversize_frame_closes_before_buffering_it() -> None:
    conn = Conn()
    conn.feed(b"\x06\xfd" + (MAX_FRAME_SIZE).to_bytes(2, "big"))
    assert conn.counters["face.oversize"] == 1 and conn.closed


def test_partial_frame_at_close_is_counted_once() -> None:
    conn = Conn()
    conn.feed(INTEREST + DATA[:7])  # the peer hangs up in the middle of the Data
    conn.transport.connection_lost(None)
    assert len(conn.sink.interests) == 1 and not conn.sink.data
    assert conn.counters["face.truncated_frame"] == 1 and conn.closed
    whole = Conn()
    whole.feed(INTEREST)
    whole.transport.connection_lost(None)
    assert whole.counters["face.truncated_frame"] == 0
    bad = Conn()
    bad.feed(INTEREST + b"\x05")  # a header's first octet is buffered...
    bad.feed(b"\xfd\x00\x01")  # ...and the header is bad: counted as that, only
    assert bad.counters["face.bad_tlv"] == 1 and bad.closed
    assert bad.counters["face.truncated_frame"] == 0


def test_send_and_bounded_write_buffer() -> None:
    conn = Conn(send_limit=1000)
    conn.face.send_interest(INTEREST)
    assert conn.sock.written == [INTEREST]
    conn.sock.buffered = 990
    conn.face.send_interest(INTEREST)
    assert conn.counters["face.drop_send_queue_full"] == 1
    assert conn.transport.out_bytes == len(INTEREST)


def test_peer_disconnect_closes_once() -> None:
    conn = Conn()
    conn.transport.connection_lost(None)
    conn.transport.connection_lost(None)
    conn.face.close()
    assert conn.closed == [conn.face]
    conn.face.send_data(DATA)
    assert conn.counters["face.drop_closed"] == 1
