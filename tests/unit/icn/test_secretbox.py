"""Per-call secrets: both ends derive the same key, sealed messages open only under that key and
aad, tampering and short input raise DecryptError, bad peer keys raise SecurityError.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icn.errors import DecryptError, SecurityError
from icn.security.secretbox import NONCE_LEN, TAG_LEN, CallKey, EphemeralKey, derive_key
from tests.unit.icn.test_name import SETTINGS

SALT = b"/call/name"
INFO = b"icn call key"


def _pair() -> tuple[CallKey, CallKey]:
    client, server = EphemeralKey.generate(), EphemeralKey.generate()
    return (
        derive_key(client, server.public_bytes, SALT, INFO),
        derive_key(server, client.public_bytes, SALT, INFO),
    )


def test_public_bytes_are_32_and_distinct() -> None:
    a, b = EphemeralKey.generate(), EphemeralKey.generate()
    assert len(a.public_bytes) == 32 and a.public_bytes != b.public_bytes
    assert a.public_bytes.hex() in repr(a)


@SETTINGS
@given(plaintext=st.binary(max_size=2000), aad=st.binary(max_size=64))
def test_both_sides_derive_the_same_key(plaintext: bytes, aad: bytes) -> None:
    client, server = _pair()
    assert server.open(client.seal(plaintext, aad), aad) == plaintext
    assert client.open(server.seal(plaintext, aad), aad) == plaintext


def test_sealed_blob_layout_and_fresh_nonces() -> None:
    client, _ = _pair()
    blobs = [client.seal(b"same message") for _ in range(4)]
    assert all(len(b) == NONCE_LEN + len(b"same message") + TAG_LEN for b in blobs)
    assert len({b[:NONCE_LEN] for b in blobs}) == 4


def test_salt_and_info_separate_keys() -> None:
    a, b = EphemeralKey.generate(), EphemeralKey.generate()
    blob = derive_key(a, b.public_bytes, SALT, INFO).seal(b"x")
    for salt, info in ((b"/other/call", INFO), (SALT, b"other purpose")):
        with pytest.raises(DecryptError):
            derive_key(b, a.public_bytes, salt, info).open(blob)


def test_ten_megabytes() -> None:
    client, server = _pair()
    plaintext = os.urandom(10_000_000)
    blob = client.seal(plaintext, aad=b"k")
    assert len(blob) == len(plaintext) + NONCE_LEN + TAG_LEN
    assert server.open(memoryview(blob), aad=b"k") == plaintext


@SETTINGS
@given(plaintext=st.binary(max_size=200), at=st.integers(0), mask=st.integers(1, 255))
def test_any_changed_byte_raises_decrypt_error(plaintext: bytes, at: int, mask: int) -> None:
    client, server = _pair()
    blob = bytearray(client.seal(plaintext))
    blob[at % len(blob)] ^= mask
    with pytest.raises(DecryptError, match="does not authenticate"):
        server.open(bytes(blob))


def test_wrong_key_or_aad_raises_decrypt_error() -> None:
    client, server = _pair()
    other, _ = _pair()
    blob = client.seal(b"secret", aad=b"call-1")
    with pytest.raises(DecryptError):
        other.open(blob, aad=b"call-1")
    with pytest.raises(DecryptError):
        server.open(blob, aad=b"call-2")
    with pytest.raises(DecryptError):
        server.open(blob)


@pytest.mark.parametrize("size", [0, 1, NONCE_LEN, NONCE_LEN + TAG_LEN - 1])
def test_short_input_raises_decrypt_error(size: int) -> None:
    client, _ = _pair()
    with pytest.raises(DecryptError, match="shorter than nonce and tag"):
        client.open(bytes(size))


def test_decrypt_error_is_a_security_error() -> None:
    assert issubclass(DecryptError, SecurityError)


@pytest.mark.parametrize("size", [0, 31, 33, 64])
def test_peer_key_of_wrong_length_raises_security_error(size: int) -> None:
    with pytest.raises(SecurityError, match=f"{size} bytes, expected 32"):
        derive_key(EphemeralKey.generate(), bytes(size), SALT, INFO)


# Points of small order on Curve25519 (https://cr.yp.to/ecdh.html#validate): every one of them
# makes the shared secret all zeros, whoever the other side is.
LOW_ORDER_POINTS = [
    bytes(32),
    b"\x01" + bytes(31),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
    bytes.fromhex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
]


@pytest.mark.parametrize("point", LOW_ORDER_POINTS)
def test_low_order_peer_key_raises_security_error(point: bytes) -> None:
    with pytest.raises(SecurityError, match="low-order point"):
        derive_key(EphemeralKey.generate(), point, SALT, INFO)


def test_call_key_needs_32_bytes() -> None:
    with pytest.raises(SecurityError, match="32 bytes, got 16"):
        CallKey(bytes(16))
    assert "00" not in repr(CallKey(bytes(32)))
