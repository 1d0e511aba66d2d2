"""Signed Interests of NDN packet format v0.3 (the form current NFD management commands use).

The layout follows the spec's construction order: strip any ParametersSha256Digest component,
add ApplicationParameters (empty if there are none), add InterestSignatureInfo, sign the name
components plus everything from ApplicationParameters to the end of InterestSignatureInfo, add
InterestSignatureValue, then append the digest of the whole parameters block to the name.

NFD rejects a command whose SignatureTime is not strictly greater than the last one it saw from
the same key, so times handed out by this module never repeat or go backwards within a process,
even when two commands are built in the same millisecond or the clock steps back.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass

from icn.errors import DecodeError, EncodeError
from icn.wire import tlv_types as T
from icn.wire.encode import EncodedInterest, checked_component_ends
from icn.wire.name import component_ends
from icn.wire.packet import InterestView
from icn.wire.signer import DIGEST_SHA256, Signer, sign_pieces
from icn.wire.tlv import (
    Buffer,
    encode_nni_tlv,
    encode_tlv,
    encode_varnum,
    is_critical,
    iter_tlvs,
    read_nni,
    read_tl,
)

SIGNATURE_NONCE_SIZE = 8

_time_lock = threading.Lock()
_last_sig_time = 0


def next_signature_time() -> int:
    """A SignatureTime (ms since the epoch) greater than every one returned before."""
    global _last_sig_time
    with _time_lock:
        now = time.time_ns() // 1_000_000
        _last_sig_time = max(now, _last_sig_time + 1)
        return _last_sig_time


def _strip_params_digest(name: bytes) -> tuple[bytes, list[int]]:
    """The name without ParametersSha256Digest components (a name copied from a received
    signed Interest carries the old one, which must not be signed or duplicated), and its
    component ends."""
    ends = checked_component_ends(name)
    parts = []
    kept = []
    prev = size = 0
    for end in ends:
        if name[prev] != T.COMP_PARAMS_DIGEST:
            parts.append(name[prev:end])
            size += end - prev
            kept.append(size)
        prev = end
    if len(kept) == len(ends):
        return name, ends
    return b"".join(parts), kept


def _signature_info(
    signer: Signer, key_locator: bytes | None, nonce: bytes, when: int, seq: int | None = None
) -> bytes:
    info = signer.signature_info()
    if key_locator is not None:
        if any(typ == T.KEY_LOCATOR for typ, _, _ in iter_tlvs(info, 0, len(info))):
            raise EncodeError("the signer already sets a KeyLocator; do not pass key_locator")
        info += encode_tlv(T.KEY_LOCATOR, encode_tlv(T.NAME, key_locator))
    info += encode_tlv(T.SIGNATURE_NONCE, nonce)
    info += encode_nni_tlv(T.SIGNATURE_TIME, when)
    if seq is not None:
        info += encode_nni_tlv(T.SIGNATURE_SEQ_NUM, seq)
    return encode_tlv(T.INTEREST_SIGNATURE_INFO, info)


def make_signed_interest(
    name: bytes,
    *,
    app_params: bytes = b"",
    signer: Signer = DIGEST_SHA256,
    sig_nonce: bytes | None = None,
    sig_time_ms: int | None = None,
    sig_seq: int | None = None,
    lifetime: int | None = None,
    can_be_prefix: bool = False,
    must_be_fresh: bool = False,
    key_locator: bytes | None = None,
    hop_limit: int | None = None,
    forwarding_hint: list[bytes] | None = None,
    nonce: bytes | None = None,
) -> bytes:
    """Encode a v0.3 signed Interest: the wire of :func:`encode_signed_interest`."""
    return encode_signed_interest(
        name,
        app_params=app_params,
        signer=signer,
        sig_nonce=sig_nonce,
        sig_time_ms=sig_time_ms,
        sig_seq=sig_seq,
        lifetime=lifetime,
        can_be_prefix=can_be_prefix,
        must_be_fresh=must_be_fresh,
        key_locator=key_locator,
        hop_limit=hop_limit,
        forwarding_hint=forwarding_hint,
        nonce=nonce,
    ).wire


def encode_signed_interest(
    name: bytes,
    *,
    app_params: bytes = b"",
    signer: Signer = DIGEST_SHA256,
    sig_nonce: bytes | None = None,
    sig_time_ms: int | None = None,
    sig_seq: int | None = None,
    lifetime: int | None = None,
    can_be_prefix: bool = False,
    must_be_fresh: bool = False,
    key_locator: bytes | None = None,
    hop_limit: int | None = None,
    forwarding_hint: list[bytes] | None = None,
    nonce: bytes | None = None,
) -> EncodedInterest:
    """Encode a v0.3 signed Interest; ``name`` and ``key_locator`` are name values.

    ``sig_nonce`` defaults to 8 random octets and ``sig_time_ms`` to now, strictly increasing
    per process unless ``sig_seq`` is given (an explicit time is used as given); ``lifetime``
    None leaves InterestLifetime out (4 s by the spec).  The ParametersSha256Digest component
    is appended last.  Raises EncodeError on bad fields.  Returns the offsets it wrote with the
    wire (:class:`~icn.wire.encode.EncodedInterest`).
    """
    name, ends = _strip_params_digest(name)
    if not name:
        raise EncodeError("an Interest name needs at least one component")
    if nonce is not None and len(nonce) != 4:
        raise EncodeError(f"Nonce must be 4 octets, got {len(nonce)}")
    if hop_limit is not None and not 0 <= hop_limit <= 255:
        raise EncodeError(f"HopLimit must be in [0, 255], got {hop_limit}")
    if sig_nonce is None:
        sig_nonce = os.urandom(SIGNATURE_NONCE_SIZE)
    elif not sig_nonce:
        raise EncodeError("SignatureNonce needs at least one octet")
    # an explicit time is the caller's business and leaves the automatic sequence alone.  With
    # a sequence number the receiver orders by it and only bounds the time's skew, so the time
    # is the clock's: forcing it past the last one by a millisecond per Interest ran it ahead
    # of the clock by 9 s every second at 10,000 session calls a second, until the server
    # refused them as stale
    if sig_time_ms is not None:
        when = sig_time_ms
    elif sig_seq is not None:
        when = time.time_ns() // 1_000_000
    else:
        when = next_signature_time()

    # the parameters block in pieces, hashed and signed where they are: a large argument is
    # copied once, into the packet (was five times)
    params_head = b"\x24" + encode_varnum(len(app_params))
    sig_info = _signature_info(signer, key_locator, sig_nonce, when, sig_seq)
    sig = sign_pieces(signer, (name, params_head, app_params, sig_info))
    sig_value = encode_tlv(T.INTEREST_SIGNATURE_VALUE, sig)
    digest = hashlib.sha256(params_head)
    for piece in (app_params, sig_info, sig_value):
        digest.update(piece)
    full_name = name + b"\x02\x20" + digest.digest()

    parts = [encode_tlv(T.NAME, full_name)]
    if can_be_prefix:
        parts.append(b"\x21\x00")
    if must_be_fresh:
        parts.append(b"\x12\x00")
    if forwarding_hint:
        hint = b"".join(encode_tlv(T.NAME, n) for n in forwarding_hint)
        parts.append(encode_tlv(T.FORWARDING_HINT, hint))
    nonce_at = sum(map(len, parts)) + 2
    parts.append(b"\x0a\x04" + (nonce if nonce is not None else os.urandom(4)))
    if lifetime is not None:
        parts.append(encode_nni_tlv(T.INTEREST_LIFETIME, lifetime))
    if hop_limit is not None:
        parts.append(b"\x22\x01" + bytes((hop_limit,)))
    parts += (params_head, app_params, sig_info, sig_value)
    header = b"\x05" + encode_varnum(sum(map(len, parts)))
    ends.append(len(full_name))
    return EncodedInterest(b"".join([header, *parts]), full_name, ends, len(header) + nonce_at)


# ---- reading -------------------------------------------------------------------------------

_SIG_INFO_FIELDS = frozenset(
    (T.SIGNATURE_TYPE, T.KEY_LOCATOR, T.SIGNATURE_NONCE, T.SIGNATURE_TIME, T.SIGNATURE_SEQ_NUM)
)


@dataclass(slots=True)
class SignatureFields:
    """What a SignatureInfo (or InterestSignatureInfo) says."""

    sig_type: int
    key_name: bytes | None = None  # a KeyLocator Name's value; None also for a KeyDigest
    nonce: bytes | None = None
    time_ms: int | None = None
    seq: int | None = None


def parse_signature_info(buf: bytes, start: int, end: int) -> SignatureFields:
    """A SignatureInfo or InterestSignatureInfo value; DecodeError when malformed."""
    fields: dict[int, tuple[int, int]] = {}
    for typ, vstart, vend in iter_tlvs(buf, start, end):
        if not fields and typ != T.SIGNATURE_TYPE:
            raise DecodeError("SignatureInfo must start with SignatureType")
        if typ in _SIG_INFO_FIELDS:
            if typ in fields:
                raise DecodeError(f"duplicate element {typ} in SignatureInfo")
            fields[typ] = (vstart, vend)
        elif is_critical(typ):
            raise DecodeError(f"unexpected critical element {typ} in SignatureInfo")
    if not fields:
        raise DecodeError("empty SignatureInfo")
    sig = SignatureFields(read_nni(buf, *fields[T.SIGNATURE_TYPE]))
    if T.KEY_LOCATOR in fields:
        typ, vstart, vend = read_tl(buf, *fields[T.KEY_LOCATOR])
        if typ == T.NAME:
            component_ends(buf, vstart, vend)
            sig.key_name = buf[vstart:vend]
        elif typ != T.KEY_DIGEST:
            raise DecodeError(f"unexpected element {typ} in KeyLocator")
    if T.SIGNATURE_NONCE in fields:
        vstart, vend = fields[T.SIGNATURE_NONCE]
        if vstart == vend:
            raise DecodeError("empty SignatureNonce")
        sig.nonce = buf[vstart:vend]
    if T.SIGNATURE_TIME in fields:
        sig.time_ms = read_nni(buf, *fields[T.SIGNATURE_TIME])
    if T.SIGNATURE_SEQ_NUM in fields:
        sig.seq = read_nni(buf, *fields[T.SIGNATURE_SEQ_NUM])
    return sig


@dataclass(slots=True)
class SignedInterest:
    """A v0.3 signed Interest, read: its signature fields, its ApplicationParameters value, and
    the two pieces of its signed portion (the name's components without the parameters digest,
    then ApplicationParameters through InterestSignatureInfo)."""

    fields: SignatureFields
    params: Buffer
    name_part: bytes
    block_part: Buffer
    value: bytes


def read_signed_interest(iv: InterestView, *, check_digest: bool = True) -> SignedInterest:
    """The signature of a parsed Interest (:func:`icn.wire.packet.parse_interest`), with the
    ParametersSha256Digest checked; the signature itself is the caller's to verify (it knows
    the key).  DecodeError for an Interest that is not a well-formed v0.3 signed Interest.

    ``check_digest=False`` leaves the digest to a keyed signature the caller checks next (an
    HMAC covers the same octets and more): one hash over a large argument saved.  The
    parameters and the signed block are views of the wire, not copies."""
    wire, name, ends = iv.wire, iv.name, iv.name_ends
    if not iv.has_params:
        raise DecodeError("the Interest is not signed (no ApplicationParameters)")
    dstart = ends[-2] if len(ends) > 1 else 0
    if name[dstart] != T.COMP_PARAMS_DIGEST:
        raise DecodeError("ParametersSha256Digest must be the last name component")
    _, off, end = read_tl(wire, 0, len(wire))
    params_at = value_at = -1
    view = memoryview(wire)
    params: Buffer = b""
    sig_value = b""
    info: tuple[int, int] | None = None
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        if params_at < 0:
            if typ == T.APPLICATION_PARAMETERS:
                params_at, params = off, view[vstart:vend]
        elif typ == T.INTEREST_SIGNATURE_INFO and info is None:
            info = (vstart, vend)
        elif typ == T.INTEREST_SIGNATURE_VALUE and info is not None and value_at < 0:
            value_at, sig_value = off, wire[vstart:vend]
        elif typ in (T.INTEREST_SIGNATURE_INFO, T.INTEREST_SIGNATURE_VALUE):
            raise DecodeError("duplicate or misplaced InterestSignatureInfo/Value")
        off = vend
    if info is None:
        raise DecodeError("the Interest is not signed (no InterestSignatureInfo)")
    if value_at < 0:
        raise DecodeError("InterestSignatureValue missing")
    # the digest covers everything from ApplicationParameters to the end, as in ndn-cxx
    if check_digest and hashlib.sha256(view[params_at:end]).digest() != name[dstart + 2 :]:
        raise DecodeError("ParametersSha256Digest does not match the parameters")
    return SignedInterest(
        parse_signature_info(wire, *info),
        params,
        name[:dstart],
        view[params_at:value_at],
        sig_value,
    )
