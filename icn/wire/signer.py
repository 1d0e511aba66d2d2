"""The signer hook used by the encoders.  Key-based signers (HMAC, ECDSA, Ed25519) plug in here."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol

from icn.wire import tlv_types as T
from icn.wire.tlv import Buffer, encode_nni_tlv, encode_tlv


class Signer(Protocol):
    """Produces SignatureInfo and the SignatureValue over a packet's signed portion."""

    def signature_info(self) -> bytes:
        """The SignatureInfo TLV-VALUE (SignatureType, KeyLocator...)."""
        ...

    def sign(self, signed_portion: bytes) -> bytes:
        """The SignatureValue TLV-VALUE."""
        ...


class DigestSha256Signer:
    """SignatureType 0: SHA-256 of the signed portion, no key."""

    _INFO = encode_nni_tlv(T.SIGNATURE_TYPE, T.SIG_DIGEST_SHA256)

    def signature_info(self) -> bytes:
        return self._INFO

    def sign(self, signed_portion: bytes) -> bytes:
        return hashlib.sha256(signed_portion).digest()

    def digest_parts(self, parts: Iterable[Buffer]) -> bytes:
        """The signature over the signed portion given in pieces (hashed in place, unjoined)."""
        h = hashlib.sha256()
        for part in parts:
            h.update(part)
        return h.digest()


class NullSigner:
    """SignatureType 200 (NullSignature): no signature value, nothing hashed."""

    _INFO = encode_nni_tlv(T.SIGNATURE_TYPE, T.SIG_NULL)

    def signature_info(self) -> bytes:
        return self._INFO

    def sign(self, signed_portion: bytes) -> bytes:
        return b""


def signature_info_tlv(signer: Signer) -> bytes:
    return encode_tlv(T.SIGNATURE_INFO, signer.signature_info())


DIGEST_SHA256 = DigestSha256Signer()
NULL_SIGNATURE = NullSigner()


def sign_pieces(signer: Signer, pieces: Sequence[Buffer]) -> bytes:
    """The signature over the concatenation of ``pieces`` without joining them when the signer
    can take them apart (DigestSha256, and any signer with ``sign_parts``, as HMAC's): a large
    content is hashed where it is instead of copied first."""
    if isinstance(signer, DigestSha256Signer):
        return signer.digest_parts(pieces)
    if isinstance(signer, NullSigner):
        return b""  # a large content is not even joined
    by_parts = getattr(signer, "sign_parts", None)
    if by_parts is not None:
        return bytes(by_parts(*pieces))
    return signer.sign(b"".join(pieces))
