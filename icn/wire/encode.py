"""Template encoders for the Interests and Data the system sends in bulk.

``make_interest`` and ``make_data`` build packets by concatenating pre-encoded parts, which costs
a few microseconds instead of the tens that a full model encoder costs.  ``encode_interest`` also
returns the offsets it wrote (name, component ends, Nonce), so a sender never parses its own
Interest back.  Names are name values
(bytes of the Name TLV-VALUE, see :mod:`icn.wire.name`).
"""

from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

from icn.errors import DecodeError, EncodeError
from icn.wire import tlv_types as T
from icn.wire.name import component_ends
from icn.wire.signer import DIGEST_SHA256, Signer, sign_pieces
from icn.wire.tlv import Buffer, encode_nni, encode_nni_tlv, encode_tlv, encode_varnum

_CBP = b"\x21\x00"
_MBF = b"\x12\x00"
_NONCE_HDR = b"\x0a\x04"


def _tlv(typ_bytes: bytes, value: bytes) -> bytes:
    return typ_bytes + encode_varnum(len(value)) + value


class EncodedInterest(NamedTuple):
    """An Interest as :func:`encode_interest` wrote it: what a sender needs to know of it
    without parsing it back."""

    wire: bytes
    name: bytes  # the Name TLV-VALUE written (with the ParametersSha256Digest it was given)
    name_ends: list[int]  # end offset of each component of ``name``
    nonce_pos: int  # offset of the 4 Nonce octets in ``wire``


def make_interest(
    name: bytes,
    *,
    nonce: bytes | None = None,
    lifetime: int | None = None,
    can_be_prefix: bool = False,
    must_be_fresh: bool = False,
    hop_limit: int | None = None,
    forwarding_hint: list[bytes] | None = None,
    app_params: bytes | None = None,
) -> bytes:
    """Encode an Interest.  ``lifetime`` None or 4000 ms is omitted (the default).

    With ``app_params`` the ParametersSha256Digest component gets the digest of the parameters:
    it is filled in where the name already has one (a name taken from a received Interest),
    else appended.  Raises EncodeError on an empty name or an out-of-range field.
    """
    return _encode_interest(
        name,
        nonce,
        lifetime,
        can_be_prefix,
        must_be_fresh,
        hop_limit,
        forwarding_hint,
        app_params,
        False,
    )[0]


def encode_interest(
    name: bytes,
    *,
    nonce: bytes | None = None,
    lifetime: int | None = None,
    can_be_prefix: bool = False,
    must_be_fresh: bool = False,
    hop_limit: int | None = None,
    forwarding_hint: list[bytes] | None = None,
    app_params: bytes | None = None,
) -> EncodedInterest:
    """:func:`make_interest`, returning where it wrote the name and the Nonce too (a malformed
    name is refused: EncodeError)."""
    return EncodedInterest(
        *_encode_interest(
            name,
            nonce,
            lifetime,
            can_be_prefix,
            must_be_fresh,
            hop_limit,
            forwarding_hint,
            app_params,
            True,
        )
    )


def _encode_interest(
    name: bytes,
    nonce: bytes | None,
    lifetime: int | None,
    can_be_prefix: bool,
    must_be_fresh: bool,
    hop_limit: int | None,
    forwarding_hint: list[bytes] | None,
    app_params: bytes | None,
    want_ends: bool,
) -> tuple[bytes, bytes, list[int], int]:
    """The one Interest encoder: wire, name written, its component ends (left empty unless
    ``want_ends`` or the parameters digest needed them: walking the name costs half a
    microsecond that :func:`make_interest`'s callers do not spend), Nonce offset."""
    if not name:
        raise EncodeError("an Interest name needs at least one component")
    if nonce is not None and len(nonce) != 4:
        raise EncodeError(f"Nonce must be 4 octets, got {len(nonce)}")
    if hop_limit is not None and not 0 <= hop_limit <= 255:
        raise EncodeError(f"HopLimit must be in [0, 255], got {hop_limit}")
    ends = checked_component_ends(name) if want_ends else []
    parts = [b""]
    if app_params is not None:
        params = encode_tlv(T.APPLICATION_PARAMETERS, app_params)
        ends = ends or checked_component_ends(name)
        name, ends = _with_params_digest(name, ends, hashlib.sha256(params).digest())
    elif b"\x02\x20" in name and _params_digest_at(name, ends or checked_component_ends(name)) >= 0:
        raise EncodeError("a ParametersSha256Digest component needs app_params")
    parts[0] = encode_tlv(T.NAME, name)
    if can_be_prefix:
        parts.append(_CBP)
    if must_be_fresh:
        parts.append(_MBF)
    if forwarding_hint:
        parts.append(
            encode_tlv(T.FORWARDING_HINT, b"".join(encode_tlv(T.NAME, n) for n in forwarding_hint))
        )
    nonce_at = sum(map(len, parts)) + 2
    parts.append(_NONCE_HDR + (nonce if nonce is not None else os.urandom(4)))
    if lifetime is not None and lifetime != T.DEFAULT_INTEREST_LIFETIME_MS:
        parts.append(encode_nni_tlv(T.INTEREST_LIFETIME, lifetime))
    if hop_limit is not None:
        parts.append(b"\x22\x01" + bytes((hop_limit,)))
    if app_params is not None:
        parts.append(params)
    value = b"".join(parts)
    header = b"\x05" + encode_varnum(len(value))
    return header + value, name, ends, len(header) + nonce_at


def checked_component_ends(name: bytes) -> list[int]:
    """:func:`~icn.wire.name.component_ends` for a name about to be encoded: EncodeError if it
    is malformed."""
    try:
        return component_ends(name)
    except DecodeError as exc:
        raise EncodeError(f"malformed name: {exc}") from None


def _params_digest_at(name: bytes, ends: list[int]) -> int:
    """Offset of the ParametersSha256Digest component in ``name``, or -1."""
    prev = 0
    for end in ends:
        if name[prev] == T.COMP_PARAMS_DIGEST:
            return prev
        prev = end
    return -1


def _with_params_digest(name: bytes, ends: list[int], digest: bytes) -> tuple[bytes, list[int]]:
    """``name`` (and its ends) with its ParametersSha256Digest component set to ``digest``
    (appended if absent), so that re-encoding a received name never yields two digest
    components."""
    at = _params_digest_at(name, ends)
    if at < 0:
        return name + b"\x02\x20" + digest, [*ends, len(name) + 34]
    return name[: at + 2] + digest + name[at + 34 :], ends


class DataParts(NamedTuple):
    """A Data packet as three buffers: ``head`` (type, length, Name, MetaInfo, the Content's
    type and length, and any ``lead`` of the Content), ``content`` (the caller's bytes-like
    object, not copied: the Content, or its rest after the lead) and ``tail``
    (SignatureInfo and SignatureValue).  A stream socket writes them with one vectored write
    (``writelines``: uvloop's ``writev``), so a large payload goes from the producer's object
    to the kernel without being copied into a packet first.  ``bytes(...)`` via :meth:`join`
    where one buffer is needed (a datagram, an LP header in front, an in-memory face)."""

    head: bytes
    content: Buffer
    tail: bytes

    @property
    def size(self) -> int:
        """The packet's length in octets."""
        return len(self.head) + len(self.content) + len(self.tail)

    def join(self) -> bytes:
        return b"".join(self)


class Uncached(NamedTuple):
    """A Data (whole or in parts) sent with NDNLPv2 CachePolicy NoCache, so the producer's
    forwarder passes it on without caching it: an answer only its one asker can use (a session
    call's answer, whose name no later Interest repeats), which would otherwise take the room
    of data that others may ask for again.  The field goes from an app to its forwarder; as in
    NFD, forwarders do not pass it on."""

    data: bytes | DataParts


class Nacked(NamedTuple):
    """Not a Data: a network Nack of the Interest ``interest`` (its wire, as received) with
    ``reason`` (a NackReason code), for a producer that cannot take the Interest now, e.g. a
    RICE server with every job slot taken (Congestion): the forwarders then try another
    producer of the name, which a Data answer, even an error, would stop them doing."""

    interest: bytes
    reason: int


# What a producer hands to a reply path or an endpoint's put: a Data wire, whole or in parts,
# or one not to be cached; or, to a reply path, a Nack of the Interest it answers.
Outgoing = bytes | DataParts | Uncached | Nacked


def data_of(wire: Outgoing) -> bytes:
    """The Data packet an :data:`Outgoing` holds, as one wire (joined if it is in parts);
    EncodeError for a Nack."""
    if isinstance(wire, Nacked):
        raise EncodeError("a Nack holds no Data")
    data = wire.data if isinstance(wire, Uncached) else wire
    return data.join() if isinstance(data, DataParts) else data


def data_parts(
    name: bytes,
    content: Buffer = b"",
    *,
    freshness: int | None = None,
    content_type: int | None = None,
    final_block_id: bytes | None = None,
    signer: Signer | None = DIGEST_SHA256,
    lead: bytes = b"",
) -> DataParts:
    """Encode a Data packet signed by ``signer`` (DigestSha256 by default; None: no signature),
    leaving ``content`` (any bytes-like object, e.g. a memoryview of a larger object) in place:
    DigestSha256 and HMAC hash it where it is; another signer gets the signed portion joined.
    ``lead``: octets the Content starts with, before ``content`` (a small header in front of a
    large payload), written at the end of ``head`` so that neither is copied into the other."""
    meta = b""
    if content_type is not None and content_type != T.CONTENT_BLOB:
        meta += encode_nni_tlv(T.CONTENT_TYPE, content_type)
    if freshness is not None:
        meta += encode_nni_tlv(T.FRESHNESS_PERIOD, freshness)
    if final_block_id is not None:
        meta += encode_tlv(T.FINAL_BLOCK_ID, final_block_id)
    name_tlv = encode_tlv(T.NAME, name)
    if meta:
        name_tlv += encode_tlv(T.META_INFO, meta)
    content_head = b"\x15" + encode_varnum(len(lead) + len(content)) + lead
    tail = b""
    if signer is not None:
        sig_info = encode_tlv(T.SIGNATURE_INFO, signer.signature_info())
        sig = sign_pieces(signer, (name_tlv, content_head, content, sig_info))
        tail = sig_info + b"\x17" + encode_varnum(len(sig)) + sig
    size = len(name_tlv) + len(content_head) + len(content) + len(tail)
    return DataParts(b"\x06" + encode_varnum(size) + name_tlv + content_head, content, tail)


def make_data(
    name: bytes,
    content: Buffer = b"",
    *,
    freshness: int | None = None,
    content_type: int | None = None,
    final_block_id: bytes | None = None,
    signer: Signer | None = DIGEST_SHA256,
) -> bytes:
    """Encode a Data packet signed by ``signer`` (DigestSha256 by default; None: no signature).

    ``content`` may be any bytes-like object (a memoryview of a larger object): it is copied
    once, into the packet, and DigestSha256 hashes it in place.
    """
    return b"".join(
        data_parts(
            name,
            content,
            freshness=freshness,
            content_type=content_type,
            final_block_id=final_block_id,
            signer=signer,
        )
    )


class DataTemplate:
    """Pre-encoded Data parts for a producer that answers many names with one shape.

    ``build(name, content)`` costs one SHA-256 (DigestSha256) or nothing extra (unsigned).
    """

    __slots__ = ("_meta", "_sig_info", "_signer")

    def __init__(self, *, freshness: int | None = None, signer: Signer | None = DIGEST_SHA256):
        self._meta = (
            encode_tlv(T.META_INFO, encode_nni_tlv(T.FRESHNESS_PERIOD, freshness))
            if freshness is not None
            else b""
        )
        self._signer = signer
        self._sig_info = encode_tlv(T.SIGNATURE_INFO, signer.signature_info()) if signer else b""

    def build(self, name: bytes, content: bytes) -> bytes:
        body = b"".join(
            (
                b"\x07",
                encode_varnum(len(name)),
                name,
                self._meta,
                b"\x15",
                encode_varnum(len(content)),
                content,
                self._sig_info,
            )
        )
        if self._signer is not None:
            sig = self._signer.sign(body)
            body += b"\x17" + encode_varnum(len(sig)) + sig
        return b"\x06" + encode_varnum(len(body)) + body


def nni(value: int) -> bytes:
    """Re-export for callers building components by hand."""
    return encode_nni(value)
