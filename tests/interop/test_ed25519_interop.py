"""Ed25519 signatures both ways with python-ndn, the reference codec: python-ndn parses our
Ed25519 Data and signed Interests and its Ed25519 checker accepts them; our verify_data accepts
Data signed by python-ndn's Ed25519Signer.  No forwarder: packets are handed over as bytes.
"""

from __future__ import annotations

from typing import Any

import pytest
from Cryptodome.PublicKey import ECC
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from ndn.encoding import MetaInfo, Name, SignatureType, make_data, parse_data, parse_interest
from ndn.security import Ed25519Checker, Ed25519Signer, verify_ed25519

from icn.errors import ValidationError
from icn.security.keys import Identity, SignatureInfo, signature_info_of, verify_data
from icn.security.signed_interest import make_signed_interest
from icn.wire import encode
from icn.wire import tlv_types as T
from icn.wire.name import from_uri, to_uri
from tests.unit.icn.test_name import SETTINGS

PRIVATE = Ed25519PrivateKey.generate()
IDENTITY = Identity(PRIVATE)
# python-ndn (through pycryptodome) takes keys as DER: SubjectPublicKeyInfo and PKCS#8
PUBLIC_DER = PRIVATE.public_key().public_bytes(
    serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
)
PRIVATE_DER = PRIVATE.private_bytes(
    serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
)
NAME = "/interop/ed25519/obj"


def _joined(parts: Any) -> bytes:
    return b"".join(bytes(p) for p in parts)


@SETTINGS
@given(content=st.binary(max_size=2000), freshness=st.one_of(st.none(), st.integers(0, 2**32)))
def test_python_ndn_verifies_our_data(content: bytes, freshness: int | None) -> None:
    wire = encode.make_data(from_uri(NAME), content, freshness=freshness, signer=IDENTITY.signer())
    name, meta, got, sig = parse_data(wire)
    assert Name.to_str(name) == NAME
    assert bytes(got or b"") == content
    assert meta.freshness_period == freshness
    assert sig.signature_info.signature_type == SignatureType.ED25519
    assert _joined(sig.signature_info.key_locator.name) == IDENTITY.key_name
    assert verify_ed25519(ECC.import_key(PUBLIC_DER), sig)


async def test_python_ndn_checker_accepts_ours_and_refuses_tampering() -> None:
    checker = Ed25519Checker.from_key(to_uri(IDENTITY.key_name), PUBLIC_DER)
    wire = encode.DataTemplate(freshness=100, signer=IDENTITY.signer()).build(
        from_uri(NAME), b"hello"
    )
    name, _, _, sig = parse_data(wire)
    assert await checker(name, sig)
    name, _, _, sig = parse_data(wire.replace(b"hello", b"jello"))
    assert not await checker(name, sig)


def test_python_ndn_verifies_our_signed_interest() -> None:
    wire = make_signed_interest(from_uri(NAME), app_params=b"args", signer=IDENTITY.signer())
    _, _, app_params, sig = parse_interest(wire)
    assert bytes(app_params) == b"args"
    assert sig.signature_info.signature_type == SignatureType.ED25519
    assert _joined(sig.signature_info.key_locator.name) == IDENTITY.key_name
    assert verify_ed25519(ECC.import_key(PUBLIC_DER), sig)


@SETTINGS
@given(content=st.binary(max_size=2000), freshness=st.one_of(st.none(), st.integers(0, 2**32)))
def test_we_verify_python_ndn_data(content: bytes, freshness: int | None) -> None:
    key_name = "/interop/KEY/%01%02"
    signer = Ed25519Signer(key_name, PRIVATE_DER)
    wire = bytes(make_data(NAME, MetaInfo(freshness_period=freshness), content, signer=signer))
    verify_data(wire, IDENTITY.public_bytes)
    assert signature_info_of(wire) == SignatureInfo(T.SIG_ED25519, from_uri(key_name))


def test_we_refuse_python_ndn_data_signed_by_another_key() -> None:
    other = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    wire = bytes(make_data(NAME, MetaInfo(), b"x", signer=Ed25519Signer("/other/KEY", other)))
    with pytest.raises(ValidationError, match="does not verify"):
        verify_data(wire, IDENTITY.public_bytes)
