"""Per-call secrets for remote calls: an X25519 exchange, HKDF-SHA256, ChaCha20-Poly1305.

Each side of a call makes a fresh :class:`EphemeralKey`, sends its public half (inside signed
packets, which is what authenticates it), and derives the same :class:`CallKey` from its own
private half and the peer's public half.  Arguments and results are then sealed under that key,
so only the two ends of the call read them, whatever caches and forwarders hold the packets.

``derive_key`` does not mix the public keys into HKDF by itself: bind the call into ``salt`` or
``info`` (the call's name, say), so a key derived for one call is useless for another.  A nonce
is 12 random bytes per message; with one key per call that stays far below the 2^32 messages at
which random nonces risk repeating.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from icn.errors import DecryptError, SecurityError
from icn.wire.tlv import Buffer

KEY_LEN = 32
PUBLIC_KEY_LEN = 32
NONCE_LEN = 12
TAG_LEN = 16


class EphemeralKey:
    """An X25519 key pair for one call; the private half never leaves this object."""

    __slots__ = ("_key", "public_bytes")

    def __init__(self, private_key: X25519PrivateKey) -> None:
        self._key = private_key
        self.public_bytes = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @classmethod
    def generate(cls) -> EphemeralKey:
        return cls(X25519PrivateKey.generate())

    def __repr__(self) -> str:
        return f"EphemeralKey(public={self.public_bytes.hex()})"


class CallKey:
    """A 32-byte ChaCha20-Poly1305 key.  A sealed blob is nonce || ciphertext || tag."""

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_LEN:
            raise SecurityError(f"a call key is {KEY_LEN} bytes, got {len(key)}")
        self._aead = ChaCha20Poly1305(key)

    def seal(self, plaintext: Buffer, aad: bytes = b"") -> bytes:
        """Encrypt and authenticate ``plaintext``; ``aad`` is authenticated, not sent."""
        nonce = os.urandom(NONCE_LEN)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, blob: Buffer, aad: bytes = b"") -> bytes:
        """The plaintext of a sealed ``blob``.  DecryptError if it was altered, sealed under
        another key or with another ``aad``, or is too short to hold a nonce and a tag."""
        if len(blob) < NONCE_LEN + TAG_LEN:
            raise DecryptError(
                f"sealed message of {len(blob)} bytes is shorter than nonce and tag "
                f"({NONCE_LEN + TAG_LEN})"
            )
        view = memoryview(blob)
        try:
            return self._aead.decrypt(bytes(view[:NONCE_LEN]), view[NONCE_LEN:], aad)
        except InvalidTag:
            raise DecryptError(
                "sealed message does not authenticate (altered, or another key or aad)"
            ) from None

    def __repr__(self) -> str:
        return "CallKey(...)"


def derive_key(my_private: EphemeralKey, peer_public: bytes, salt: bytes, info: bytes) -> CallKey:
    """The call key both sides derive: HKDF-SHA256(X25519(my_private, peer_public)).

    SecurityError if ``peer_public`` is not 32 bytes or is a low-order point (the shared
    secret would be all zeros, known to anyone).
    """
    return CallKey(derive_secret(my_private, peer_public, salt, info))


def derive_secret(
    my_private: EphemeralKey, peer_public: bytes, salt: bytes, info: bytes, length: int = KEY_LEN
) -> bytes:
    """``length`` bytes both sides derive, HKDF-SHA256(X25519(my_private, peer_public)), to cut
    into keys (a session's HMAC key and its sealing key); errors as :func:`derive_key`."""
    if len(peer_public) != PUBLIC_KEY_LEN:
        raise SecurityError(
            f"peer X25519 public key is {len(peer_public)} bytes, expected {PUBLIC_KEY_LEN}"
        )
    try:
        shared = my_private._key.exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError:
        raise SecurityError(
            "peer X25519 public key is a low-order point: refused, the shared secret would be "
            "all zeros"
        ) from None
    hkdf = HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info)
    return hkdf.derive(shared)
