"""The manifest format (icn.security.manifest) and an object published with one
(icn.dataplane.publish)."""

from __future__ import annotations

import pytest

from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import data_content, final_block_id, segment_number
from icn.errors import DecodeError, ValidationError
from icn.security.keys import Identity, verify_data
from icn.security.manifest import (
    OBJECT_SIZE,
    SEGMENT_DIGESTS,
    Manifest,
    manifest_name,
    signed_portion_digest,
)
from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri, segment
from icn.wire.packet import parse_data, parse_interest
from icn.wire.signer import DIGEST_SHA256
from icn.wire.tlv import encode_nni_tlv, encode_tlv

PREFIX = from_uri("/obj/v1")


def test_encode_decode_round_trip() -> None:
    m = Manifest(10, 4, [bytes([i]) * 32 for i in range(3)])
    assert Manifest.decode(m.encode()) == m
    assert Manifest.decode(memoryview(m.encode())) == m


def test_decode_skips_unknown_non_critical_fields() -> None:
    m = Manifest(10, 4, [bytes([i]) * 32 for i in range(3)])
    assert Manifest.decode(encode_tlv(0xF0, b"later") + m.encode()) == m


@pytest.mark.parametrize(
    "content",
    [
        encode_nni_tlv(OBJECT_SIZE, 4),  # no SegmentSize nor digests
        Manifest(4, 4, [b"x" * 32]).encode() + encode_nni_tlv(OBJECT_SIZE, 4),  # repeated
        Manifest(4, 4, [b"x" * 32]).encode() + encode_tlv(0xF1, b""),  # unknown critical
        Manifest(4, 4, [b"x" * 32]).encode()[:-1],  # truncated
        encode_nni_tlv(OBJECT_SIZE, 4)
        + encode_nni_tlv(0xD2, 4)
        + encode_tlv(SEGMENT_DIGESTS, b"x" * 31),
        encode_nni_tlv(OBJECT_SIZE, 9)
        + encode_nni_tlv(0xD2, 4)
        + encode_tlv(SEGMENT_DIGESTS, b"x" * 32),
        encode_nni_tlv(OBJECT_SIZE, 4)
        + encode_nni_tlv(0xD2, 0)
        + encode_tlv(SEGMENT_DIGESTS, b"x" * 32),
    ],
)
def test_decode_rejects_malformed(content: bytes) -> None:
    with pytest.raises(DecodeError):
        Manifest.decode(content)


def test_signed_portion_digest_is_the_digest_signature() -> None:
    wire = make_data(PREFIX + segment(0), b"abc", signer=DIGEST_SHA256)
    assert signed_portion_digest(wire) == wire[-32:]
    with pytest.raises(DecodeError):
        signed_portion_digest(make_data(PREFIX, b"abc", signer=None))


def _segments(content: bytes, size: int) -> list[bytes]:
    n = max(1, -(-len(content) // size))
    return [
        make_data(
            PREFIX + segment(i),
            content[i * size : (i + 1) * size],
            final_block_id=segment(n - 1),
        )
        for i in range(n)
    ]


def test_check_accepts_listed_segments_and_rejects_others() -> None:
    content = bytes(range(10))
    segs = _segments(content, 4)
    m = Manifest(len(content), 4, [w[-32:] for w in segs])
    for w in segs:
        m.check(PREFIX, parse_data(w))
    forged = make_data(PREFIX + segment(1), b"EVIL", final_block_id=segment(2))
    with pytest.raises(ValidationError, match="does not match"):
        m.check(PREFIX, parse_data(forged))
    # segment 0's bytes under segment 1's name: the digest covers the name
    moved = make_data(PREFIX + segment(1), content[0:4], final_block_id=segment(2))
    with pytest.raises(ValidationError):
        m.check(PREFIX, parse_data(moved))
    with pytest.raises(ValidationError, match="not listed"):
        m.check(PREFIX, parse_data(make_data(PREFIX + segment(3), b"")))
    with pytest.raises(ValidationError, match="not a segment"):
        m.check(PREFIX, parse_data(make_data(from_uri("/other") + segment(0), b"")))
    with pytest.raises(ValidationError, match="not a segment"):
        m.check(PREFIX, parse_data(make_data(PREFIX + b"\x08\x01x", b"")))


def _answer(obj: SegmentedObject, name: bytes, can_be_prefix: bool = False) -> bytes | None:
    return obj.answer(parse_interest(make_interest(name, can_be_prefix=can_be_prefix)))


def test_published_object_serves_a_signed_manifest_of_its_segments() -> None:
    ident = Identity.generate()
    content = bytes(range(256)) * 100  # 25600 bytes: 4 segments of 8000 (the last shorter)
    obj = SegmentedObject(PREFIX, content, segment_size=8000, signer=ident.signer(), manifest=True)
    first = _answer(obj, manifest_name(PREFIX), can_be_prefix=True)
    assert first is not None
    dv = parse_data(first)
    verify_data(first, ident.public_bytes)  # the manifest is Ed25519-signed
    assert segment_number(final_block_id(dv)) == 0  # one manifest segment: 4 * 32 bytes
    m = Manifest.decode(data_content(dv))
    assert (m.object_size, m.segment_size, m.last_segment) == (len(content), 8000, 3)
    got = b""
    for i in range(4):
        wire = _answer(obj, PREFIX + segment(i))
        assert wire is not None
        seg = parse_data(wire)
        m.check(PREFIX, seg)  # every segment matches its listed digest
        assert wire[-34:-32] == b"\x17\x20"  # and carries DigestSha256, for other fetchers
        got += data_content(seg)
    assert got == content


def test_object_without_manifest_does_not_answer_for_one() -> None:
    obj = SegmentedObject(PREFIX, b"abc", segment_size=8000)
    assert _answer(obj, manifest_name(PREFIX), can_be_prefix=True) is None
    with pytest.raises(ValueError):
        obj.manifest_object()


def test_segments_evicted_from_the_cache_are_built_again_identically() -> None:
    ident = Identity.generate()
    content = bytes(range(256)) * 100
    for kw in ({"signer": ident.signer()}, {"signer": ident.signer(), "manifest": True}):
        whole = SegmentedObject(PREFIX, content, segment_size=1000, **kw)
        small = SegmentedObject(PREFIX, content, segment_size=1000, cache_bytes=3000, **kw)
        if kw.get("manifest"):
            whole.manifest_object()
            small.manifest_object()  # digests kept; later builds are not hashed again
        first = [small.segment_wire(i) for i in range(small.last_segment + 1)]
        assert len(small._built) <= 3  # bounded: about three 1000-byte segments
        again = [small.segment_wire(i) for i in range(small.last_segment + 1)]
        assert first == again == [whole.segment_wire(i) for i in range(whole.last_segment + 1)]


def test_segments_are_built_as_parts_viewing_the_object() -> None:
    """The cache keeps headers and signatures only: each segment's content is a view of the
    object, which a stream socket writes from where it is."""
    content = bytes(range(256)) * 100
    obj = SegmentedObject(PREFIX, content, segment_size=1000, manifest=True)
    for i in range(obj.last_segment + 1):
        parts = obj.segment_parts(i)
        assert parts is not None and isinstance(parts.content, memoryview)
        assert parts.content.obj is content
        assert parts.join() == obj.segment_wire(i)
        assert bytes(parts.content) == content[i * 1000 : (i + 1) * 1000]
    assert obj.segment_parts(obj.last_segment + 1) is None
    built = sum(len(p.head) + len(p.tail) for p in obj._built.values())
    assert built < len(content) // 10
    name = PREFIX + segment(3)
    answer = obj.answer_parts(parse_interest(make_interest(name)))
    assert answer is not None and answer.join() == _answer(obj, name)
