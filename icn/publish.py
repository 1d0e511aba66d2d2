"""Publishing a segmented object: ``<prefix>/seg=<i>`` Data answered on demand.

The consumer side (:func:`icn.segments.fetch_segments`) keeps a window of Interests in flight;
this side answers each from the object's bytes, building and signing a segment only when first
asked and keeping it for retransmissions, so a 10 MB value costs no more than the segments that
are actually pulled.  Every segment carries FinalBlockId, so the first answer tells the
consumer how many to ask for.

With ``manifest=True`` the object is signed once: its segments carry DigestSha256 and the
object's signer signs only a manifest of their digests (:mod:`icn.manifest`), served beside them
as ``<prefix>/32=manifest``; the segments are all built when the manifest is first asked for.
"""

from __future__ import annotations

from collections.abc import Callable

from icn import tlv_types as T
from icn.encode import make_data
from icn.manifest import DIGEST_LEN, MANIFEST_COMPONENT, Manifest, manifest_name
from icn.name import component_ends, segment
from icn.packet import InterestView
from icn.segments import segment_number
from icn.signer import DIGEST_SHA256, Signer
from icn.tlv import read_tl

Reply = Callable[[bytes], None]

# Content per segment: a segment with its name and signature stays under NDN's 8800-octet
# packet limit, so stream faces carry it whole and UDP faces need at most a few fragments.
DEFAULT_SEGMENT_SIZE = 8000


class SegmentedObject:
    """The bytes of one object served as segments under ``prefix`` (a name value)."""

    __slots__ = (
        "_built",
        "_manifest",
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
        self._built: dict[int, bytes] = {}
        # signed once: segments by digest, the manifest by ``signer``
        self.manifested = manifest
        self._manifest: SegmentedObject | None = None

    @property
    def last_segment(self) -> int:
        return max(0, (len(self.content) - 1) // self.segment_size)

    def segment_wire(self, index: int) -> bytes | None:
        """The Data of segment ``index`` (built once), or None past the last segment."""
        wire = self._built.get(index)
        if wire is None:
            last = self.last_segment
            if not 0 <= index <= last:
                return None
            size = self.segment_size
            wire = make_data(
                self.prefix + segment(index),
                self.content[index * size : (index + 1) * size],  # copied once, into the packet
                freshness=self.freshness,
                final_block_id=segment(last),
                signer=DIGEST_SHA256 if self.manifested else self.signer,
            )
            self._built[index] = wire
        return wire

    def manifest_object(self) -> SegmentedObject:
        """The object's manifest, served as a segmented object signed by ``signer`` (built, with
        every segment of the object, on the first call).  ValueError without ``manifest``."""
        if not self.manifested:
            raise ValueError("this object is not published with a manifest")
        if self._manifest is None:
            digests = []
            for i in range(self.last_segment + 1):
                wire = self.segment_wire(i)
                assert wire is not None  # every index up to last_segment has a segment
                # a DigestSha256 SignatureValue (17 20 <digest>) ends the packet make_data built
                digests.append(wire[-DIGEST_LEN:])
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
        name = iv.name
        prefix = self.prefix
        if name == prefix:
            return self.segment_wire(0) if iv.can_be_prefix else None
        if len(name) <= len(prefix) or not name.startswith(prefix):
            return None
        rest = name[len(prefix) :]
        if self.manifested and rest.startswith(MANIFEST_COMPONENT):
            return self.manifest_object().answer(iv)
        _, _, end = read_tl(rest, 0, len(rest))
        if end != len(rest) or rest[0] != T.COMP_SEGMENT:
            return None
        index = segment_number(rest)
        return None if index is None else self.segment_wire(index)

    def handler(self, iv: InterestView, reply: Reply) -> None:
        """An :class:`~icn.endpoint.Endpoint` handler serving this object; other names under
        the prefix get no answer (the consumer times out, as from any producer)."""
        wire = self.answer(iv)
        if wire is not None:
            self.served += 1
            reply(wire)
