"""Parse and authenticate NFD management command Interests.

Why: a command changes forwarder state (routes, faces, strategies), so, like NFD, we act on it
only when it is a well-formed signed Interest that is fresh and not a replay.  python-ndn's
``NDNApp.register`` puts the signature in the name (v0.2 "signed command Interest":
``.../<timestamp>/<nonce>/<SignatureInfo>/<SignatureValue>``); appv2, pynfdc and ndn-cxx send a
v0.3 signed Interest.  :func:`parse_command` reads both into one :class:`SignedCommand`, and
:class:`CommandValidator` applies NFD's freshness rules with bounded memory.

Errors follow NFD: an unparsable Interest or ControlParameters component raises DecodeError (the
dispatcher drops it without a reply); every signature problem raises CommandRejected(403).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from icn.errors import DecodeError
from icn.security.signed_interest import (
    SignatureFields,
    parse_signature_info,
    read_signed_interest,
)
from icn.wire import tlv_types as T
from icn.wire.name import generic
from icn.wire.packet import InterestView, parse_interest
from icn.wire.tlv import iter_tlvs, read_nni, read_tl

CONTROL_PARAMETERS = 0x68
# The key name ndn-cxx gives DigestSha256 signatures, which carry no KeyLocator.
DIGEST_KEY_NAME = generic("localhost") + generic("identity") + generic("digest-sha256")
_KEYED_TYPES = frozenset(
    (T.SIG_SHA256_WITH_RSA, T.SIG_SHA256_WITH_ECDSA, T.SIG_HMAC_WITH_SHA256, T.SIG_ED25519)
)


class CommandRejected(Exception):
    """The command fails authorization; the dispatcher answers ControlResponse(status, text)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status} {text}")
        self.status = status
        self.text = text


@dataclass(frozen=True, slots=True)
class SignedCommand:
    params: bytes | None  # whole ControlParameters TLV (0x68), None if there is no such component
    key_name: bytes  # KeyLocator Name value, or DIGEST_KEY_NAME for DigestSha256
    signature_time_ms: int
    signature_nonce: bytes
    form: str  # "v1" (name-embedded signature) or "v2" (v0.3 signed Interest)
    # what a trust policy verifies: the signature's type, the signed portion and the value
    sig_type: int = T.SIG_DIGEST_SHA256
    signed: bytes = b""
    value: bytes = b""


def _reject(text: str) -> CommandRejected:
    return CommandRejected(403, text)


def parse_command(interest_wire: bytes, prefix_components: int = 4) -> SignedCommand:
    """Read a command Interest whose first ``prefix_components`` components are the verb prefix."""
    iv = parse_interest(interest_wire)
    name = iv.name
    comps = list(zip([0, *iv.name_ends[:-1]], iv.name_ends, strict=True))
    n = len(comps)
    # Index of the first signature component (v2: params digest; v1: timestamp; unsigned: n).
    trailer = n - 1 if iv.has_params else n - 4 if n >= prefix_components + 4 else n
    params = None
    if prefix_components < trailer:
        params = _control_parameters(name, *comps[prefix_components])
    try:
        if iv.has_params:
            key, t, nonce, signed = _check_v2(iv)
        elif trailer < n:
            key, t, nonce, signed = _check_v1(name, comps[-4:])
        else:
            raise _reject("command Interest is not signed")
    except DecodeError as exc:
        raise _reject(f"malformed signature: {exc}") from None
    form = "v2" if iv.has_params else "v1"
    return SignedCommand(params, key, t, nonce, form, signed.sig_type, signed.signed, signed.value)


@dataclass(frozen=True, slots=True)
class _Signed:
    sig_type: int
    signed: bytes
    value: bytes


def _control_parameters(name: bytes, start: int, end: int) -> bytes:
    typ, vstart, vend = read_tl(name, start, end)
    if typ != T.COMP_GENERIC:
        raise DecodeError("ControlParameters must be a GenericNameComponent")
    ptyp, pstart, pend = read_tl(name, vstart, vend)
    if ptyp != CONTROL_PARAMETERS or pend != vend:
        raise DecodeError("name component is not one ControlParameters element")
    list(iter_tlvs(name, pstart, pend))  # its fields must be whole TLVs
    return name[vstart:vend]


def _generic_value(name: bytes, start: int, end: int) -> bytes:
    typ, vstart, vend = read_tl(name, start, end)
    if typ != T.COMP_GENERIC:
        raise DecodeError("signature components must be GenericNameComponents")
    return name[vstart:vend]


def _inner(buf: bytes, expect: int) -> tuple[int, int]:
    """Bounds of the value of the single TLV of type ``expect`` that fills ``buf``."""
    typ, vstart, vend = read_tl(buf, 0, len(buf))
    if typ != expect or vend != len(buf):
        raise DecodeError(f"expected one TLV of type {expect}")
    return vstart, vend


def _check_v1(name: bytes, trailer: list[tuple[int, int]]) -> tuple[bytes, int, bytes, _Signed]:
    stamp, nonce, info, value = (_generic_value(name, s, e) for s, e in trailer)
    sig = parse_signature_info(info, *_inner(info, T.SIGNATURE_INFO))
    vstart, vend = _inner(value, T.SIGNATURE_VALUE)
    t = read_nni(stamp, 0, len(stamp))
    if not nonce:
        raise DecodeError("empty command nonce")
    # Signed portion: the component TLVs before the SignatureValue component.
    signed = _Signed(sig.sig_type, name[: trailer[-1][0]], value[vstart:vend])
    return _key_name(sig, signed.signed, signed.value), t, nonce, signed


def _check_v2(iv: InterestView) -> tuple[bytes, int, bytes, _Signed]:
    si = read_signed_interest(iv)  # DecodeError: rejected by parse_command
    sig = si.fields
    if sig.nonce is None:
        raise _reject("SignatureNonce missing")
    if sig.time_ms is None:
        raise _reject("SignatureTime missing")
    signed = _Signed(sig.sig_type, si.name_part + si.block_part, si.value)
    return _key_name(sig, signed.signed, signed.value), sig.time_ms, sig.nonce, signed


def _key_name(sig: SignatureFields, signed: bytes, value: bytes) -> bytes:
    if sig.sig_type == T.SIG_DIGEST_SHA256:  # a KeyLocator, if any, is ignored
        if hashlib.sha256(signed).digest() != value:
            raise _reject("DigestSha256 signature does not match")
        return DIGEST_KEY_NAME
    if sig.sig_type not in _KEYED_TYPES:
        raise _reject(f"unsupported SignatureType {sig.sig_type}")
    if sig.key_name is None:
        raise _reject("KeyLocator Name required for a keyed signature")
    if not value:
        raise _reject("empty SignatureValue")
    # No trust configuration exists yet, so a keyed signature is accepted unverified, as NFD's
    # default `trust-anchor { type any; }` does; CommandValidator still applies the freshness
    # and replay rules per KeyLocator name.
    return sig.key_name


class CommandValidator:
    """NFD's signed-Interest freshness rules: time within +-window of now, strictly increasing per
    key name, and each (key, nonce) used once.  Memories are bounded: least recently used keys
    and oldest nonces are evicted; nonces older than the window are forgotten early, since the
    time check rejects them anyway."""

    def __init__(
        self,
        *,
        window_ms: int = 120_000,
        max_keys: int = 1_000,
        max_nonces: int = 10_000,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        counters: Counter[str] | None = None,
    ) -> None:
        self.window_ms = window_ms
        self.max_keys = max_keys
        self.max_nonces = max_nonces
        self._clock = wall_clock_ms
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self._keys: OrderedDict[bytes, int] = OrderedDict()  # key name -> last accepted time
        self._nonces: OrderedDict[tuple[bytes, bytes], int] = OrderedDict()  # -> its time

    def check(self, cmd: SignedCommand, order_scope: bytes = b"") -> None:
        """Accept ``cmd`` and remember it, or raise CommandRejected(403).

        Times must increase per key name plus ``order_scope`` (the dispatcher scopes the shared
        DigestSha256 key by requesting face); nonces are remembered per key name alone.
        """
        now = self._clock()
        t = cmd.signature_time_ms
        if abs(t - now) > self.window_ms:
            raise self._fail("mgmt.auth_stale", f"signature time is {t - now} ms off the clock")
        nonces = self._nonces
        while nonces and next(iter(nonces.values())) < now - self.window_ms:
            nonces.popitem(last=False)  # too old to pass the time check anyway
        nonce_key = (cmd.key_name, cmd.signature_nonce)
        if nonce_key in nonces:
            raise self._fail("mgmt.auth_replay", "signature nonce already used")
        order_key = cmd.key_name + order_scope
        last = self._keys.get(order_key)
        if last is not None and t <= last:
            raise self._fail("mgmt.auth_not_increasing", "signature time not after the last one")
        self._keys[order_key] = t
        self._keys.move_to_end(order_key)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)
        nonces[nonce_key] = t
        while len(nonces) > self.max_nonces:
            nonces.popitem(last=False)
        self.counters["mgmt.auth_ok"] += 1

    def _fail(self, counter: str, text: str) -> CommandRejected:
        self.counters[counter] += 1
        return _reject(text)
