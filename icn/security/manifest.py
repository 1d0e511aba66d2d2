"""Manifests: one signature for a whole segmented object (FLIC's idea for CCNx, in NDN TLV).

A manifest lists, in segment order, the SHA-256 of each segment's signed portion (Name through
SignatureInfo), which is exactly the SignatureValue of a DigestSha256 segment.  The segments
stay ordinary DigestSha256 Data, so any NDN consumer (python-ndn's fetcher included) can fetch
them; a consumer that fetches the manifest verifies one signature (Ed25519, ...) on it and then
only compares each segment's digest with the listed one, so per-segment authenticity costs one
hash per segment instead of one public-key check.  The digest covers the segment's name, so a
segment cannot be replayed at another index or under another object.

The manifest is published beside its object as ``<prefix>/32=manifest`` and is itself segmented
(``<prefix>/32=manifest/seg=<i>``), each manifest segment signed by the object's signer: a 256 MiB
object in 1 MiB segments has a one-segment manifest (8 KiB), in 8000-byte segments about 130.

Content of the manifest (TLV-TYPEs from the application range, non-critical even numbers so a
later version can add fields an older reader skips):

    ObjectSize      (0xD0) NonNegativeInteger  total Content bytes of the object
    SegmentSize     (0xD2) NonNegativeInteger  Content bytes per segment (the last may be shorter)
    SegmentDigests  (0xD4) 32 * n octets       one SHA-256 per segment, segment 0 first
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from icn.errors import DecodeError, ValidationError
from icn.wire import tlv_types as T
from icn.wire.name import segment
from icn.wire.packet import DataView
from icn.wire.tlv import encode_nni_tlv, encode_tlv, is_critical, read_nni, read_tl

OBJECT_SIZE = 0xD0
SEGMENT_SIZE = 0xD2
SEGMENT_DIGESTS = 0xD4
DIGEST_LEN = 32
# the keyword component naming an object's manifest: <prefix>/32=manifest
MANIFEST_COMPONENT = encode_tlv(T.COMP_KEYWORD, b"manifest")


def manifest_name(prefix: bytes) -> bytes:
    """The name value of the manifest of the object published under ``prefix``."""
    return prefix + MANIFEST_COMPONENT


def signed_portion_digest(wire: bytes | memoryview) -> bytes:
    """SHA-256 of a Data packet's signed portion (the DigestSha256 SignatureValue it should
    carry).  DecodeError if the packet has no SignatureValue."""
    _, off, end = read_tl(wire, 0, len(wire))
    start = off
    while off < end:
        typ, _, vend = read_tl(wire, off, end)
        if typ == T.SIGNATURE_VALUE:
            return hashlib.sha256(memoryview(wire)[start:off]).digest()
        off = vend
    raise DecodeError("Data has no SignatureValue")


@dataclass(frozen=True)
class Manifest:
    """What a manifest says: the object's size, its segment size and each segment's digest."""

    object_size: int
    segment_size: int
    digests: Sequence[bytes]

    def __post_init__(self) -> None:
        if self.segment_size <= 0:
            raise DecodeError("manifest SegmentSize must be positive")
        expected = max(1, -(-self.object_size // self.segment_size))
        if len(self.digests) != expected:
            raise DecodeError(f"manifest lists {len(self.digests)} digests for {expected} segments")

    @property
    def last_segment(self) -> int:
        return len(self.digests) - 1

    def encode(self) -> bytes:
        """The manifest's Content."""
        return (
            encode_nni_tlv(OBJECT_SIZE, self.object_size)
            + encode_nni_tlv(SEGMENT_SIZE, self.segment_size)
            + encode_tlv(SEGMENT_DIGESTS, b"".join(self.digests))
        )

    @classmethod
    def decode(cls, content: bytes | memoryview) -> Manifest:
        """Read a manifest's Content; DecodeError if a field is missing, repeated or malformed."""
        fields: dict[int, tuple[int, int]] = {}
        off, end = 0, len(content)
        while off < end:
            typ, vstart, vend = read_tl(content, off, end)
            if typ in (OBJECT_SIZE, SEGMENT_SIZE, SEGMENT_DIGESTS):
                if typ in fields:
                    raise DecodeError(f"manifest field {typ:#x} repeated")
                fields[typ] = (vstart, vend)
            elif is_critical(typ):
                raise DecodeError(f"unknown critical manifest field {typ:#x}")
            off = vend
        missing = {OBJECT_SIZE, SEGMENT_SIZE, SEGMENT_DIGESTS} - fields.keys()
        if missing:
            raise DecodeError(f"manifest lacks field(s) {sorted(missing)}")
        dstart, dend = fields[SEGMENT_DIGESTS]
        if (dend - dstart) % DIGEST_LEN:
            raise DecodeError("manifest SegmentDigests is not a whole number of SHA-256 values")
        raw = bytes(content[dstart:dend])
        return cls(
            object_size=read_nni(content, *fields[OBJECT_SIZE]),
            segment_size=read_nni(content, *fields[SEGMENT_SIZE]),
            digests=[raw[i : i + DIGEST_LEN] for i in range(0, len(raw), DIGEST_LEN)],
        )

    def check(self, prefix: bytes, dv: DataView) -> None:
        """Raise ValidationError unless ``dv`` is segment ``i`` of the object under ``prefix``
        and its signed portion hashes to the ``i``-th listed digest."""
        name = dv.name
        rest = name[len(prefix) :]
        if not name.startswith(prefix) or not rest or rest[0] != T.COMP_SEGMENT:
            raise ValidationError("Data is not a segment of the manifest's object")
        _, vstart, vend = read_tl(rest, 0, len(rest))
        if vend != len(rest):
            raise ValidationError("Data is not a segment of the manifest's object")
        index = read_nni(rest, vstart, vend)
        if index > self.last_segment or rest != segment(index):
            raise ValidationError(f"segment {index} is not listed in the manifest")
        try:
            digest = signed_portion_digest(dv.wire)
        except DecodeError as exc:
            raise ValidationError(f"malformed segment: {exc}") from None
        if digest != self.digests[index]:
            raise ValidationError(f"segment {index} does not match the manifest's digest")
