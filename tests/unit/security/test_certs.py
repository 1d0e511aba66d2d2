"""NDN v2 certificates: our encoder and parser, against python-ndn's (the reference codec)."""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path

import pytest
from Cryptodome.PublicKey import ECC
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given
from hypothesis import strategies as st
from ndn.app_support.security_v2 import parse_certificate, self_sign
from ndn.encoding import Component, ContentType, Name, SignatureType, parse_data
from ndn.security import Ed25519Checker, Sha256WithEcdsaSigner, verify_ed25519

from icn.errors import ConfigError, ValidationError
from icn.security import certs
from icn.security.keys import Identity, fingerprint_of
from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.name import from_uri, to_uri
from tests.unit.icn.test_name import SETTINGS

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z
DAY = 86_400.0
CA = Identity.generate()
ALICE = Identity.generate()
CA_NAME = from_uri("/org/ca")


def _ca_cert() -> certs.Certificate:
    return certs.self_signed(CA, CA_NAME, 365 * DAY, NOW)


def _alice_cert() -> certs.Certificate:
    ca = _ca_cert()
    return certs.issue(
        ALICE.public_bytes, from_uri("/org/lab/alice"), CA, ca.key_name, 90 * DAY, NOW
    )


def test_self_signed_round_trip() -> None:
    cert = _ca_cert()
    again = certs.parse(cert.wire)
    assert again == cert
    assert to_uri(cert.identity) == "/org/ca"
    assert cert.key_name == certs.key_name_for(CA_NAME, CA.public_bytes)
    assert cert.key_id == bytes.fromhex(CA.fingerprint[:16])
    assert cert.issuer_id == b"self" and cert.self_signed
    assert cert.version == int(NOW * 1000)
    assert cert.public_key == CA.public_bytes and cert.key_type == "ed25519"
    assert cert.fingerprint == CA.fingerprint
    assert (cert.not_before, cert.not_after) == (int(NOW), int(NOW + 365 * DAY))
    assert cert.signer_key_name == cert.key_name and cert.sig_type == T.SIG_ED25519
    cert.verify(cert.sig_type, cert.signed, cert.signature)


def test_issue_is_deterministic_and_names_the_issuer() -> None:
    a, b = _alice_cert(), _alice_cert()
    assert a.wire == b.wire
    assert to_uri(a.name).startswith("/org/lab/alice/KEY/")
    assert a.issuer_id == b"NA" and not a.self_signed
    assert a.signer_key_name == _ca_cert().key_name
    _ca_cert().verify(a.sig_type, a.signed, a.signature)
    with pytest.raises(ValidationError):
        certs.parse(a.wire).verify(a.sig_type, a.signed, a.signature)  # not alice's own


def test_validity_bounds() -> None:
    cert = _alice_cert()
    assert cert.valid_at(NOW) and cert.valid_at(NOW + 90 * DAY)
    assert not cert.valid_at(NOW - 1)
    assert not cert.valid_at(NOW + 90 * DAY + 1)
    assert certs.format_time(NOW) == "20231114T221320"
    assert certs.parse_time(b"20231114T221320") == int(NOW)


def test_python_ndn_parses_ours_and_verifies_the_signature() -> None:
    ca = _ca_cert()
    alice = _alice_cert()
    got = parse_certificate(alice.wire)
    assert Name.to_str(got.name) == to_uri(alice.name)
    assert Component.get_type(got.name[-1]) == Component.TYPE_VERSION
    assert Component.to_number(got.name[-1]) == alice.version
    assert got.meta_info.content_type == ContentType.KEY
    assert got.meta_info.freshness_period == 3_600_000
    assert bytes(got.content) == alice.spki
    vp = got.signature_info.validity_period
    assert bytes(vp.not_before) == b"20231114T221320"
    assert bytes(vp.not_after) == certs.format_time(NOW + 90 * DAY).encode()
    assert got.signature_info.signature_type == SignatureType.ED25519
    assert Name.to_bytes(got.signature_info.key_locator.name)[2:] == ca.key_name
    # python-ndn's own Ed25519 verification, with the key python-ndn read from the CA's cert
    _, _, _, sig = parse_data(alice.wire)
    ca_key = ECC.import_key(bytes(parse_certificate(ca.wire).content))
    assert verify_ed25519(ca_key, sig)
    assert not verify_ed25519(ECC.import_key(bytes(got.content)), sig)  # alice's key: no


async def test_python_ndn_checker_accepts_data_signed_by_a_certified_key() -> None:
    alice = _alice_cert()
    wire = make_data(from_uri("/org/lab/alice/x"), b"hi", signer=certs.CertSigner.of(ALICE, alice))
    checker = Ed25519Checker.from_cert(alice.wire)  # the key named /org/lab/alice/KEY/<id>
    name, _, _, sig = parse_data(wire)
    assert await checker(name, sig)
    name, _, _, sig = parse_data(wire.replace(b"hi", b"ho"))
    assert not await checker(name, sig)


def test_cert_signer_refuses_another_key() -> None:
    with pytest.raises(ValidationError, match="not the one certified"):
        certs.CertSigner.of(CA, _alice_cert())


def test_we_parse_python_ndn_self_signed_ecdsa() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    der = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    key_name = "/pyndn/id/KEY/%01%02%03%04%05%06%07%08"
    _, wire = self_sign(key_name, pub, Sha256WithEcdsaSigner(key_name, der))
    cert = certs.parse(bytes(wire))
    assert to_uri(cert.key_name) == key_name
    assert to_uri(cert.identity) == "/pyndn/id"
    assert cert.issuer_id == b"self" and cert.self_signed
    assert cert.key_type == "ecdsa-p256" and cert.spki == pub == cert.public_key
    assert cert.sig_type == T.SIG_SHA256_WITH_ECDSA
    assert cert.not_before == 0 and cert.not_after > NOW
    cert.verify(cert.sig_type, cert.signed, cert.signature)
    with pytest.raises(ValidationError, match="does not verify"):
        cert.verify(cert.sig_type, cert.signed + b"x", cert.signature)
    with pytest.raises(ValidationError, match="cannot be made by"):
        cert.verify(T.SIG_ED25519, cert.signed, cert.signature)
    assert cert.fingerprint == fingerprint_of(pub)


@pytest.mark.parametrize(
    ("mutate", "complaint"),
    [
        (lambda w: w[:-10], "malformed certificate"),
        (lambda w: b"", "malformed certificate"),
        (lambda w: b"\x05\x00", "malformed certificate"),
        (lambda w: w.replace(b"\x18\x01\x02", b"\x18\x01\x00"), "ContentType"),
        (lambda w: w.replace(b"\x08\x03KEY", b"\x08\x03KEX"), "no KEY component"),
        (lambda w: w.replace(b"20231114T", b"2023X114T"), "YYYYMMDDThhmmss"),
    ],
)
def test_malformed_raises_validation_error(mutate: object, complaint: str) -> None:
    wire = _alice_cert().wire
    bad = mutate(wire)  # type: ignore[operator]
    with pytest.raises(ValidationError, match=complaint):
        certs.parse(bad)


def test_plain_data_is_not_a_certificate() -> None:
    with pytest.raises(ValidationError, match="is not /<identity>/KEY"):
        certs.parse(make_data(from_uri("/a/b"), b"x"))
    wire = make_data(
        from_uri("/a/KEY/k/self/v=1"), b"not a key", content_type=T.CONTENT_KEY, signer=None
    )
    with pytest.raises(ValidationError, match=r"not signed|SubjectPublicKeyInfo"):
        certs.parse(wire)


@SETTINGS
@given(st.binary(max_size=300))
def test_garbage_raises_only_validation_error(junk: bytes) -> None:
    for candidate in (junk, b"\x06" + bytes([len(junk) % 253]) + junk):
        with contextlib.suppress(ValidationError):
            certs.parse(candidate)


@SETTINGS
@given(st.integers(0, 400), st.binary(min_size=1, max_size=1))
def test_corrupted_certificate_raises_only_validation_error(at: int, byte: bytes) -> None:
    wire = bytearray(_alice_cert().wire)
    wire[at % len(wire)] = byte[0]
    with contextlib.suppress(ValidationError):
        certs.parse(bytes(wire))


def test_files_base64_like_ndnsec_and_raw(tmp_path: Path) -> None:
    cert = _alice_cert()
    text = certs.to_base64(cert.wire)
    lines = text.splitlines()
    assert all(len(line) == 64 for line in lines[:-1]) and 0 < len(lines[-1]) <= 64
    assert base64.b64decode("".join(lines)) == cert.wire
    path = tmp_path / "alice.cert"
    certs.save(cert, path)
    assert certs.load(path) == cert
    raw = tmp_path / "alice.ndncert"
    raw.write_bytes(cert.wire)
    assert certs.load(raw) == cert
    junk = tmp_path / "junk.cert"
    junk.write_text("hello world!")
    with pytest.raises(ConfigError, match=r"junk\.cert.*neither base64"):
        certs.load(junk)
    with pytest.raises(ConfigError, match="cannot read certificate"):
        certs.load(tmp_path / "missing.cert")
