"""Publishing a segmented object: ``<prefix>/seg=<i>`` Data answered on demand.

The consumer side (:func:`icn.dataplane.segments.fetch_segments`) keeps a window of Interests in
flight;
this side answers each from the object's bytes, building and signing a segment only when first
asked, so a 10 MB value costs no more than the segments that are actually pulled.  The segments
built last are kept for retransmissions, up to ``cache_bytes`` (16 MiB); an older one asked for
again is built again (the same packet, for a deterministic signer: DigestSha256, HMAC,
Ed25519).  Keeping every segment would hold a second copy of a large object, in memory the
producer touches for the first time (its page faults cost as much as the copy).  Every segment
carries FinalBlockId, so the first answer tells the consumer how many to ask for.  An endpoint
serves one with ``await ep.serve(obj.prefix, obj.handler)`` (``signer=ep.signer`` to sign as
the endpoint does).

With ``manifest=True`` the object is signed once: its segments carry DigestSha256 and the
object's signer signs only a manifest of their digests (:mod:`icn.security.manifest`), served
beside them
as ``<prefix>/32=manifest``.  Its digests are computed when the manifest is first asked for and
kept, so a segment built later is not hashed again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from icn.dataplane.handlers import Reply
from icn.dataplane.segments import segment_number
from icn.security.manifest import DIGEST_LEN, MANIFEST_COMPONENT, Manifest, manifest_name
from icn.wire import tlv_types as T
from icn.wire.encode import DataParts, data_parts
from icn.wire.name import component_ends, segment
from icn.wire.packet import InterestView
from icn.wire.signer import DIGEST_SHA256, DigestSha256Signer, Signer
from icn.wire.tlv import Buffer, read_nni, read_tl

# Content per segment: a segment with its name and signature stays under NDN's 8800-octet
# packet limit, so stream faces carry it whole and UDP faces need at most a few fragments.
DEFAULT_SEGMENT_SIZE = 8000
DEFAULT_CACHE_BYTES = 16 << 20


class KnownDigest(DigestSha256Signer):
    """DigestSha256 for a packet whose digest is known already (listed in its manifest)."""

    __slots__ = ("digest",)

    def __init__(self, digest: bytes) -> None:
        self.digest = digest

    def digest_parts(self, parts: Iterable[Buffer]) -> bytes:
        return self.digest


class SegmentedObject:
    """The bytes of one object served as segments under ``prefix`` (a name value)."""

    __slots__ = (
        "_built",
        "_built_bytes",
        "_digests",
        "_manifest",
        "cache_bytes",
        "content",
        "freshness",
        "manifested",
        "prefix",
        "segment_size",
        "served",
        "signer",
    )

    def __init__(
        self,
        prefix: bytes,
        content: bytes,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        freshness: int | None = None,
        signer: Signer | None = DIGEST_SHA256,
        manifest: bool = False,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        if segment_size <= 0:
            raise ValueError("segment_size must be positive")
        component_ends(prefix)  # a malformed prefix fails here, not on the first Interest
        self.prefix = prefix
        self.content = memoryview(content)
        self.segment_size = segment_size
        self.freshness = freshness
        self.signer = signer
        self.served = 0  # Data packets sent, retransmissions included
        # the segments built last, oldest first, within cache_bytes (and at least one)
        # (as DataParts: their content is a view of ``content``, so the cache holds only the
        # headers and signatures, and a stream socket writes the segment without a copy)
        self._built: OrderedDict[int, DataParts] = OrderedDict()
        self._built_bytes = 0
        self.cache_bytes = cache_bytes
        # signed once: segments by digest, the manifest by ``signer``
        self.manifested = manifest
        self._manifest: SegmentedObject | None = None
        self._digests: list[bytes] | None = None

    @property
    def last_segment(self) -> int:
        return max(0, (len(self.content) - 1) // self.segment_size)

    def segment_wire(self, index: int) -> bytes | None:
        """The Data of segment ``index``, or None past the last segment."""
        parts = self.segment_parts(index)
        return None if parts is None else parts.join()

    def segment_parts(self, index: int) -> DataParts | None:
        """Segment ``index`` as :class:`~icn.wire.encode.DataParts` (its content a view of the
        object), or None past the last segment."""
        built = self._built
        wire = built.get(index)
        if wire is None:
            last = self.last_segment
            if not 0 <= index <= last:
                return None
            size = self.segment_size
            signer = self.signer
            if self.manifested:
                digests = self._digests
                signer = DIGEST_SHA256 if digests is None else KnownDigest(digests[index])
            wire = data_parts(
                self.prefix + segment(index),
                self.content[index * size : (index + 1) * size],  # not copied
                freshness=self.freshness,
                final_block_id=segment(last),
                signer=signer,
            )
            built[index] = wire
            self._built_bytes += wire.size
            while self._built_bytes > self.cache_bytes and len(built) > 1:
                self._built_bytes -= built.popitem(last=False)[1].size
        return wire

    def manifest_object(self) -> SegmentedObject:
        """The object's manifest, served as a segmented object signed by ``signer`` (built, with
        every segment of the object, on the first call).  ValueError without ``manifest``."""
        if not self.manifested:
            raise ValueError("this object is not published with a manifest")
        if self._manifest is None:
            digests = []
            for i in range(self.last_segment + 1):
                parts = self.segment_parts(i)
                assert parts is not None  # every index up to last_segment has a segment
                # a DigestSha256 SignatureValue (17 20 <digest>) ends the packet's tail
                digests.append(parts.tail[-DIGEST_LEN:])
            self._digests = digests
            content = Manifest(len(self.content), self.segment_size, digests).encode()
            self._manifest = SegmentedObject(
                manifest_name(self.prefix),
                content,
                segment_size=self.segment_size,
                freshness=self.freshness,
                signer=self.signer,
            )
        return self._manifest

    def answer(self, iv: InterestView) -> bytes | None:
        """The Data answering ``iv``: its segment, or segment 0 for a CanBePrefix Interest for
        the prefix itself (how a fetch starts); None if the Interest asks for something else."""
        parts = self.answer_parts(iv)
        return None if parts is None else parts.join()

    def answer_parts(self, iv: InterestView) -> DataParts | None:
        """:meth:`answer` as :class:`~icn.wire.encode.DataParts`, for a reply path."""
        name = iv.name
        prefix = self.prefix
        if name == prefix:
            return self.segment_parts(0) if iv.can_be_prefix else None
        if len(name) <= len(prefix) or not name.startswith(prefix):
            return None
        rest = name[len(prefix) :]
        if self.manifested and rest.startswith(MANIFEST_COMPONENT):
            return self.manifest_object().answer_parts(iv)
        _, _, end = read_tl(rest, 0, len(rest))
        if end != len(rest) or rest[0] != T.COMP_SEGMENT:
            return None
        index = segment_number(rest)
        return None if index is None else self.segment_parts(index)

    def handler(self, iv: InterestView, reply: Reply) -> None:
        """An :class:`~icn.dataplane.endpoint.Endpoint` handler serving this object; other names
        under
        the prefix get no answer (the consumer times out, as from any producer)."""
        wire = self.answer_parts(iv)
        if wire is not None:
            self.served += 1
            reply(wire)


def signed_once(
    prefix: bytes,
    content: bytes,
    *,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    freshness: int | None = None,
    signer: Signer | None = DIGEST_SHA256,
) -> SegmentedObject:
    """A :class:`SegmentedObject` whose public-key signature is made once: with a manifest when
    it spans more than one segment and ``signer`` signs with a public key (Ed25519, ECDSA, RSA),
    else signed per segment as usual (one segment is one signature anyway; a digest or an HMAC
    costs one hash per segment, as the manifest's digests do).  Fetch it with
    :func:`~icn.dataplane.segments.fetch_signed`."""
    return SegmentedObject(
        prefix,
        content,
        segment_size=segment_size,
        freshness=freshness,
        signer=signer,
        manifest=signer is not None and public_key_signer(signer) and len(content) > segment_size,
    )


# signatures that cost a public-key operation each, where a manifest pays (an HMAC or a digest
# costs one hash of the segment, as the manifest's digest does)
PUBLIC_KEY_TYPES = frozenset({T.SIG_SHA256_WITH_RSA, T.SIG_SHA256_WITH_ECDSA, T.SIG_ED25519})


def public_key_signer(signer: Signer) -> bool:
    """Whether ``signer`` makes a public-key signature (its SignatureInfo's SignatureType)."""
    info = signer.signature_info()
    typ, vstart, vend = read_tl(info, 0, len(info))
    return typ == T.SIGNATURE_TYPE and read_nni(info, vstart, vend) in PUBLIC_KEY_TYPES
