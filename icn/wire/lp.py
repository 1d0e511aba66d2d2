"""NDNLPv2: LpPacket reader and encoders (Fragment, Sequence/FragIndex/FragCount, Nack, PitToken,
IncomingFaceId, NextHopFaceId, CachePolicy, CongestionMark).

A bare Interest or Data is a valid link-layer packet too; :func:`parse_lp` is only for type 100.
Unknown header fields are skipped only if their type is in [800, 959] with the two low bits 00;
any other unknown field drops the whole packet (DecodeError).
"""

from __future__ import annotations

from icn.errors import DecodeError, EncodeError
from icn.wire import tlv_types as T
from icn.wire.tlv import encode_nni_tlv, encode_tlv, encode_varnum, read_nni, read_tl

_KNOWN_FIELDS = frozenset(
    (
        T.LP_SEQUENCE,
        T.LP_FRAG_INDEX,
        T.LP_FRAG_COUNT,
        T.LP_PIT_TOKEN,
        T.LP_NACK,
        T.LP_INCOMING_FACE_ID,
        T.LP_NEXT_HOP_FACE_ID,
        T.LP_CACHE_POLICY,
        T.LP_CONGESTION_MARK,
        T.LP_ACK,
        T.LP_TX_SEQUENCE,
        T.LP_NON_DISCOVERY,
        T.LP_PREFIX_ANNOUNCEMENT,
    )
)


# LpView's fields but the fragment, as its repr shows them (a class compiled by mypyc has no
# __slots__ to read them from)
_REPR_FIELDS: tuple[str, ...] = (
    "sequence",
    "frag_index",
    "frag_count",
    "pit_token",
    "nack_reason",
    "incoming_face_id",
    "next_hop_face_id",
    "cache_policy",
    "congestion_mark",
)


class LpView:
    """Fields of one LpPacket.  ``nack_reason`` is None when the packet is not a Nack."""

    __slots__ = (
        "cache_policy",
        "congestion_mark",
        "frag_count",
        "frag_index",
        "fragment",
        "incoming_face_id",
        "nack_reason",
        "next_hop_face_id",
        "pit_token",
        "sequence",
    )

    def __init__(self) -> None:
        self.fragment: bytes | None = None
        self.sequence: int | None = None
        self.frag_index = 0
        self.frag_count = 1
        self.pit_token: bytes | None = None
        self.nack_reason: int | None = None
        self.incoming_face_id: int | None = None
        self.next_hop_face_id: int | None = None
        self.cache_policy: int | None = None
        self.congestion_mark = 0

    def __repr__(self) -> str:
        fields = {k: getattr(self, k) for k in _REPR_FIELDS}
        size = None if self.fragment is None else len(self.fragment)
        return f"LpView(fragment={size} B, {fields})"


def parse_lp(wire: bytes) -> LpView:
    """Read an LpPacket (type 100).  Header fields must be in ascending type order."""
    end = len(wire)
    typ, off, vend = read_tl(wire, 0, end)
    if typ != T.LP_PACKET or vend != end:
        raise DecodeError("not an LpPacket")
    lp = LpView()
    last = 0
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        off = vend
        if typ == T.LP_FRAGMENT:
            if off != end:
                raise DecodeError("Fragment must be the last LpPacket field")
            if vend == vstart:
                raise DecodeError("empty Fragment")
            lp.fragment = wire[vstart:vend]
            break
        if typ < last or (typ == last and typ != T.LP_ACK):
            raise DecodeError("LpPacket header fields out of order or repeated")
        last = typ
        if typ == T.LP_PIT_TOKEN:
            if not 1 <= vend - vstart <= 32:
                raise DecodeError("PitToken must be 1-32 octets")
            lp.pit_token = wire[vstart:vend]
        elif typ == T.LP_NACK:
            lp.nack_reason = _read_nack(wire, vstart, vend)
        elif typ == T.LP_CONGESTION_MARK:
            lp.congestion_mark = read_nni(wire, vstart, vend)
        elif typ == T.LP_SEQUENCE:
            lp.sequence = _fixed8(wire, vstart, vend)
        elif typ == T.LP_FRAG_INDEX:
            lp.frag_index = read_nni(wire, vstart, vend)
        elif typ == T.LP_FRAG_COUNT:
            lp.frag_count = read_nni(wire, vstart, vend)
        elif typ == T.LP_INCOMING_FACE_ID:
            lp.incoming_face_id = read_nni(wire, vstart, vend)
        elif typ == T.LP_NEXT_HOP_FACE_ID:
            lp.next_hop_face_id = read_nni(wire, vstart, vend)
        elif typ == T.LP_CACHE_POLICY:
            lp.cache_policy = _read_cache_policy(wire, vstart, vend)
        elif typ in (T.LP_ACK, T.LP_TX_SEQUENCE):
            _fixed8(wire, vstart, vend)
        elif typ not in _KNOWN_FIELDS and not (800 <= typ <= 959 and typ & 3 == 0):
            raise DecodeError(f"unknown LpPacket field {typ} that may not be ignored")
    if lp.frag_index >= lp.frag_count:
        raise DecodeError("FragIndex must be below FragCount")
    if lp.frag_count > 1 and lp.sequence is None:
        raise DecodeError("a fragmented LpPacket needs a Sequence")
    return lp


def _fixed8(wire: bytes, start: int, end: int) -> int:
    if end - start != 8:
        raise DecodeError("Sequence/Ack/TxSequence must be 8 octets")
    return int.from_bytes(wire[start:end], "big")


_NACK_REASONS = frozenset((T.NACK_CONGESTION, T.NACK_DUPLICATE, T.NACK_NO_ROUTE))


def _read_nack(wire: bytes, start: int, end: int) -> int:
    """The NackReason; absent or unknown values read as NACK_NONE (as ndn-cxx does), so the
    severity ordering of the strategies only ever sees the four defined reasons."""
    reason = T.NACK_NONE
    off = start
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        if typ == T.LP_NACK_REASON:
            reason = read_nni(wire, vstart, vend)
        off = vend
    return reason if reason in _NACK_REASONS else T.NACK_NONE


def _read_cache_policy(wire: bytes, start: int, end: int) -> int:
    off = start
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        if typ == T.LP_CACHE_POLICY_TYPE:
            return read_nni(wire, vstart, vend)
        off = vend
    raise DecodeError("CachePolicy without CachePolicyType")


def encode_lp(
    fragment: bytes | None,
    *,
    sequence: int | None = None,
    frag_index: int | None = None,
    frag_count: int | None = None,
    pit_token: bytes | None = None,
    nack_reason: int | None = None,
    incoming_face_id: int | None = None,
    next_hop_face_id: int | None = None,
    cache_policy: int | None = None,
    congestion_mark: int = 0,
) -> bytes:
    """Build an LpPacket with fields in ascending type order and the Fragment last."""
    parts: list[bytes] = []
    if sequence is not None:
        parts.append(encode_tlv(T.LP_SEQUENCE, sequence.to_bytes(8, "big")))
    if frag_index is not None:
        parts.append(encode_nni_tlv(T.LP_FRAG_INDEX, frag_index))
    if frag_count is not None:
        parts.append(encode_nni_tlv(T.LP_FRAG_COUNT, frag_count))
    if pit_token is not None:
        if not 1 <= len(pit_token) <= 32:
            raise EncodeError(f"PitToken must be 1-32 octets, got {len(pit_token)}")
        parts.append(encode_tlv(T.LP_PIT_TOKEN, pit_token))
    if nack_reason is not None:
        inner = encode_nni_tlv(T.LP_NACK_REASON, nack_reason) if nack_reason else b""
        parts.append(encode_tlv(T.LP_NACK, inner))
    if incoming_face_id is not None:
        parts.append(encode_nni_tlv(T.LP_INCOMING_FACE_ID, incoming_face_id))
    if next_hop_face_id is not None:
        parts.append(encode_nni_tlv(T.LP_NEXT_HOP_FACE_ID, next_hop_face_id))
    if cache_policy is not None:
        inner = encode_nni_tlv(T.LP_CACHE_POLICY_TYPE, cache_policy)
        parts.append(encode_tlv(T.LP_CACHE_POLICY, inner))
    if congestion_mark:
        parts.append(encode_nni_tlv(T.LP_CONGESTION_MARK, congestion_mark))
    if fragment is not None:
        parts.append(encode_tlv(T.LP_FRAGMENT, fragment))
    value = b"".join(parts)
    return encode_varnum(T.LP_PACKET) + encode_varnum(len(value)) + value


def lp_head(
    fragment_size: int, *, pit_token: bytes | None = None, cache_policy: int | None = None
) -> bytes:
    """The octets of an LpPacket up to its Fragment's value, for a fragment of
    ``fragment_size`` octets sent after it (a large Data is written behind its header, not
    copied into it): ``lp_head(len(f), ...) + f == encode_lp(f, ...)``."""
    fields = encode_lp(None, pit_token=pit_token, cache_policy=cache_policy)
    _, vstart, _ = read_tl(fields, 0, len(fields))
    fragment_tl = encode_varnum(T.LP_FRAGMENT) + encode_varnum(fragment_size)
    size = len(fields) - vstart + len(fragment_tl) + fragment_size
    return encode_varnum(T.LP_PACKET) + encode_varnum(size) + fields[vstart:] + fragment_tl


def encode_nack(interest_wire: bytes, reason: int, pit_token: bytes | None = None) -> bytes:
    """A network Nack: the whole Interest as Fragment, with its reason."""
    return encode_lp(interest_wire, pit_token=pit_token, nack_reason=reason)
