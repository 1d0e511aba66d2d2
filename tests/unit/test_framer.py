"""The TLV stream framer (icn.wire.framer): split writes, several packets per read, oversize,
truncated and bad frames, large frames read into their own buffer, and the buffer's reuse."""

from __future__ import annotations

import random

import pytest

from icn.wire.encode import make_data, make_interest
from icn.wire.framer import TlvFramer
from icn.wire.name import from_uri

NDN_TYPES = frozenset((0x05, 0x06, 0x64))
INTEREST = make_interest(from_uri("/a/b"), nonce=b"1234")
SMALL = make_data(from_uri("/a/small"), b"s" * 300)
LARGE = make_data(from_uri("/a/large"), bytes(range(256)) * 1000)  # 256 000 octets


def framer(**kw: object) -> TlvFramer:
    kw.setdefault("types", NDN_TYPES)
    return TlvFramer(1 << 20, capacity=64 << 10, own_above=16 << 10, **kw)  # type: ignore[arg-type]


def read_like_a_socket(f: TlvFramer, stream: bytes, chunk: int) -> list[bytes]:
    """What asyncio does with a BufferedProtocol: ask for a buffer, write at most ``chunk``
    octets into it, report how many."""
    frames: list[bytes] = []
    off = 0
    while off < len(stream):
        dst = f.get_buffer(chunk)
        assert len(dst) > 0
        n = min(len(dst), chunk, len(stream) - off)
        dst[:n] = stream[off : off + n]
        off += n
        frames += f.buffer_updated(n)
    return frames


def test_one_byte_at_a_time() -> None:
    f = framer()
    out: list[bytes] = []
    for b in INTEREST + SMALL:
        out += f.feed(bytes([b]))
    assert out == [INTEREST, SMALL]
    assert f.buffered == 0 and f.error is None


def test_many_packets_in_one_read_and_a_split_tail() -> None:
    f = framer()
    stream = INTEREST * 3 + SMALL + INTEREST
    assert f.feed(stream[:-5]) == [INTEREST] * 3 + [SMALL]
    assert f.buffered == len(INTEREST) - 5
    assert f.feed(stream[-5:]) == [INTEREST]
    assert f.buffered == 0


def test_frames_are_bytes_that_later_reads_do_not_change() -> None:
    f = framer()
    first = f.feed(SMALL)
    f.feed(INTEREST * 50)  # reuses the buffer the first frame was cut from
    assert first == [SMALL] and type(first[0]) is bytes


@pytest.mark.parametrize("chunk", [1, 7, 4096, 65536, 300_000])
def test_socket_style_reads_of_any_size(chunk: int) -> None:
    stream = (INTEREST + LARGE + SMALL) * 3 + LARGE
    f = framer()
    assert read_like_a_socket(f, stream, chunk) == [INTEREST, LARGE, SMALL] * 3 + [LARGE]
    assert f.buffered == 0


def test_a_large_frame_is_read_into_its_own_buffer() -> None:
    f = framer()
    dst = f.get_buffer(-1)
    dst[:1000] = LARGE[:1000]
    assert f.buffer_updated(1000) == []
    rest = f.get_buffer(-1)
    # the buffer lent next is exactly the rest of the frame: one read can finish it in place
    assert len(rest) == len(LARGE) - 1000
    rest[:] = LARGE[1000:]
    assert f.buffer_updated(len(rest)) == [LARGE]
    assert len(f.get_buffer(-1)) == 64 << 10  # back to the shared buffer, empty


def test_random_packets_and_random_reads() -> None:
    rng = random.Random(7)
    packets = [
        make_data(from_uri(f"/r/{i}"), rng.randbytes(rng.choice([0, 10, 5000, 40_000, 200_000])))
        for i in range(60)
    ]
    stream = b"".join(packets)
    f = framer()
    out: list[bytes] = []
    off = 0
    while off < len(stream):
        dst = f.get_buffer(-1)
        n = min(len(dst), rng.randint(1, 70_000), len(stream) - off)
        dst[:n] = stream[off : off + n]
        off += n
        out += f.buffer_updated(n)
    assert out == packets


def test_oversize_breaks_the_stream_after_the_good_frames() -> None:
    f = TlvFramer(1000, types=NDN_TYPES, capacity=64 << 10, own_above=16 << 10)
    assert f.feed(INTEREST + SMALL + make_data(from_uri("/big"), b"x" * 2000) + INTEREST) == [
        INTEREST,
        SMALL,
    ]
    assert f.error == "oversize"
    assert f.feed(INTEREST) == []  # nothing is read after a broken frame


def test_oversize_skipped_when_asked() -> None:
    big = make_data(from_uri("/big"), b"x" * 50_000)
    f = TlvFramer(1000, skip_oversize=True, capacity=64 << 10, own_above=16 << 10)
    stream = INTEREST + big + SMALL
    assert read_like_a_socket(f, stream, 3000) == [INTEREST, SMALL]
    assert f.skipped == 1 and f.error is None


def test_truncated_frame_is_reported_as_buffered() -> None:
    f = framer()
    assert f.feed(INTEREST + LARGE[:30_000]) == [INTEREST]
    assert f.buffered == 30_000
    g = framer()
    g.feed(SMALL[:2])  # only the header's first octets
    assert g.buffered == 2


def test_unknown_type_and_bad_header() -> None:
    f = framer()
    assert f.feed(INTEREST + b"\x07\x01\x00") == [INTEREST]
    assert f.error == "unknown_type"
    g = framer()
    assert g.feed(INTEREST + b"\x05\xfd\x00\x01") == [INTEREST]  # non-minimal length
    assert g.error == "bad_tlv"
    h = TlvFramer(1 << 20)  # no type filter: any TLV is a frame
    assert h.feed(b"\x07\x01\x00") == [b"\x07\x01\x00"]


def test_compaction_keeps_a_partial_frame() -> None:
    # fill the shared buffer to near its end with whole frames, then split one across the edge
    f = framer()
    filler = make_data(from_uri("/f"), b"f" * 1000)
    n = (64 << 10) // len(filler)
    stream = filler * n + SMALL * 3
    assert read_like_a_socket(f, stream, 1 << 20) == [filler] * n + [SMALL] * 3


def test_bad_settings() -> None:
    with pytest.raises(ValueError):
        TlvFramer(100, capacity=64 << 10, own_above=40 << 10)
