"""HMAC-SHA256 signatures (NDN SignatureType 4) under a shared secret, for Data and signed
Interests: what a session between two parties signs with once a key exchange has given them a
secret (RICE's call sessions).  An HMAC costs a microsecond or two where an Ed25519 signature
and its check cost about a hundred; the KeyLocator names the secret (a session), so the
receiver knows which one to check with.
"""

from __future__ import annotations

import hmac
from hashlib import sha256

from icn.errors import EncodeError
from icn.wire import tlv_types as T
from icn.wire.tlv import Buffer, encode_nni_tlv, encode_tlv

MIN_KEY_LEN = 16
BLOCK = 64  # SHA-256's block size, in bytes


class HmacSigner:
    """Signs with HMAC-SHA256 under ``key``; ``key_name`` (a name value) goes in KeyLocator."""

    __slots__ = ("_info", "_inner", "_key", "_outer", "key_name")

    def __init__(self, key: bytes, key_name: bytes) -> None:
        if len(key) < MIN_KEY_LEN:
            raise EncodeError(f"an HMAC key needs at least {MIN_KEY_LEN} bytes, got {len(key)}")
        self._key = key
        self.key_name = key_name
        # RFC 2104 with the key's two padded blocks hashed once: each signature then copies
        # these states (hmac.new sets the key up again, in Python, for every message: a
        # third of a small session call's signing cost)
        block = (
            key.ljust(BLOCK, b"\0")
            if len(key) <= BLOCK
            else sha256(key).digest().ljust(BLOCK, b"\0")
        )
        self._inner = sha256(bytes(b ^ 0x36 for b in block))
        self._outer = sha256(bytes(b ^ 0x5C for b in block))
        self._info = encode_nni_tlv(T.SIGNATURE_TYPE, T.SIG_HMAC_WITH_SHA256) + encode_tlv(
            T.KEY_LOCATOR, encode_tlv(T.NAME, key_name)
        )

    def signature_info(self) -> bytes:
        return self._info

    def sign(self, signed_portion: bytes) -> bytes:
        return hmac.digest(self._key, signed_portion, sha256)

    def sign_parts(self, *parts: Buffer) -> bytes:
        """The signature over the concatenation of ``parts``, without joining them."""
        inner = self._inner.copy()
        for part in parts:
            inner.update(part)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def verify_parts(self, value: Buffer, *parts: Buffer) -> bool:
        """Whether ``value`` is this key's signature over ``parts`` (constant-time compare)."""
        return hmac.compare_digest(self.sign_parts(*parts), bytes(value))

    def __repr__(self) -> str:
        return "HmacSigner(...)"
