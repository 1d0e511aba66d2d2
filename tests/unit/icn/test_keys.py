"""Ed25519 identities: key files (0600, idempotent creation), the Signer as the encoders use it,
verify_data against tampering, wrong keys and other signature types, and authorized-keys files.
"""

from __future__ import annotations

import base64
import hashlib
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given
from hypothesis import strategies as st

from icn.errors import ConfigError, SecurityError, ValidationError
from icn.security.keys import (
    AuthorizedKeys,
    Identity,
    SignatureInfo,
    key_name_of,
    load_public_key,
    signature_info_of,
    verify_data,
)
from icn.wire import tlv_types as T
from icn.wire.encode import DataTemplate, make_data, make_interest
from icn.wire.name import from_uri, generic
from icn.wire.packet import parse_data
from icn.wire.signer import DIGEST_SHA256
from icn.wire.tlv import encode_tlv, read_tl
from tests.unit.icn.test_name import SETTINGS, nonempty_component_lists

ALICE = Identity.generate()
BOB = Identity.generate()
NAME = from_uri("/app/object/v=1")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- signing and verification ---------------------------------------------------------------


@SETTINGS
@given(
    comps=nonempty_component_lists,
    content=st.binary(max_size=300),
    freshness=st.one_of(st.none(), st.integers(0, 2**32)),
    final=st.one_of(st.none(), st.just(generic("last"))),
)
def test_make_data_round_trip(
    comps: list[bytes], content: bytes, freshness: int | None, final: bytes | None
) -> None:
    wire = make_data(
        b"".join(comps), content, freshness=freshness, final_block_id=final, signer=ALICE.signer()
    )
    verify_data(wire, ALICE.public_bytes)
    assert signature_info_of(wire) == SignatureInfo(T.SIG_ED25519, ALICE.key_name)
    assert parse_data(wire).name == b"".join(comps)


def test_data_template_round_trip() -> None:
    template = DataTemplate(freshness=1000, signer=ALICE.signer())
    for i in range(3):
        name, content = NAME + generic(str(i)), b"x" * i * 1000
        wire = template.build(name, content)
        verify_data(wire, ALICE.public_bytes)
        dv = parse_data(wire)
        assert dv.name == name and dv.freshness == 1000
        assert dv.wire[dv.content_start : dv.content_end] == content
        assert signature_info_of(wire) == SignatureInfo(T.SIG_ED25519, ALICE.key_name)
        # what make_data builds, byte for byte (Ed25519 signatures are deterministic)
        assert wire == make_data(name, content, freshness=1000, signer=ALICE.signer())


def test_signature_is_over_name_through_signature_info() -> None:
    wire = make_data(NAME, b"hello", signer=ALICE.signer())
    _, start, end = read_tl(wire, 0, len(wire))
    # the SignatureValue is the last TLV, a 64-octet Ed25519 signature (not found by searching
    # for its header: the random signature may hold those two octets too)
    sig_value_at = end - 2 - 64
    assert wire[sig_value_at : sig_value_at + 2] == b"\x17\x40"
    signed = wire[start:sig_value_at]
    assert signed.startswith(encode_tlv(T.NAME, NAME))
    assert wire[sig_value_at + 2 : end] == ALICE.sign(signed)


@SETTINGS
@given(content=st.binary(max_size=100), at=st.integers(0), mask=st.integers(1, 255))
def test_any_changed_byte_fails_verification(content: bytes, at: int, mask: int) -> None:
    wire = bytearray(make_data(NAME, content, signer=ALICE.signer()))
    wire[at % len(wire)] ^= mask
    with pytest.raises(ValidationError):
        verify_data(bytes(wire), ALICE.public_bytes)


def _replace_once(wire: bytes, old: bytes, new: bytes) -> bytes:
    assert wire.count(old) == 1 and len(old) == len(new)
    return wire.replace(old, new)


def test_tampered_content_name_and_signature_fail() -> None:
    wire = make_data(NAME, b"pay 10 to alice", signer=ALICE.signer())
    verify_data(wire, ALICE.public_bytes)
    sig = wire[-64:]
    tampered = [
        _replace_once(wire, b"pay 10 to alice", b"pay 99 to carol"),
        _replace_once(wire, b"object", b"subjec"),
        wire[:-64] + bytes((sig[0] ^ 1,)) + sig[1:],
    ]
    for bad in tampered:
        with pytest.raises(ValidationError, match="does not verify"):
            verify_data(bad, ALICE.public_bytes)


def test_data_signed_by_another_key_fails() -> None:
    wire = make_data(NAME, b"x", signer=BOB.signer())
    with pytest.raises(ValidationError, match="does not verify"):
        verify_data(wire, ALICE.public_bytes)


def test_digest_sha256_and_unsigned_data_are_refused() -> None:
    digest = make_data(NAME, b"x", signer=DIGEST_SHA256)
    assert signature_info_of(digest) == SignatureInfo(T.SIG_DIGEST_SHA256, None)
    with pytest.raises(ValidationError, match="signature type is 0, not Ed25519"):
        verify_data(digest, ALICE.public_bytes)
    with pytest.raises(ValidationError, match="not signed"):
        verify_data(make_data(NAME, b"x", signer=None), ALICE.public_bytes)


class _ShortSigner:
    def signature_info(self) -> bytes:
        return ALICE.signer().signature_info()

    def sign(self, signed_portion: bytes) -> bytes:
        return ALICE.sign(signed_portion)[:63]


class _KeyDigestSigner:
    def signature_info(self) -> bytes:
        return bytes((T.SIGNATURE_TYPE, 1, T.SIG_ED25519)) + encode_tlv(
            T.KEY_LOCATOR, encode_tlv(T.KEY_DIGEST, bytes(32))
        )

    def sign(self, signed_portion: bytes) -> bytes:
        return ALICE.sign(signed_portion)


def test_signature_of_wrong_length_is_refused() -> None:
    with pytest.raises(ValidationError, match="63 bytes"):
        verify_data(make_data(NAME, b"x", signer=_ShortSigner()), ALICE.public_bytes)


def test_key_digest_locator_has_no_key_name() -> None:
    wire = make_data(NAME, b"x", signer=_KeyDigestSigner())
    assert signature_info_of(wire) == SignatureInfo(T.SIG_ED25519, None)
    verify_data(wire, ALICE.public_bytes)


@pytest.mark.parametrize(
    "wire",
    [
        b"",
        b"\x06",
        make_interest(NAME),
        make_data(NAME, b"x", signer=ALICE.signer())[:-1],
        make_data(NAME, b"x", signer=ALICE.signer()) + b"\x00",
        # SignatureInfo without SignatureType; a KeyLocator with a malformed Name
        b"\x06\x0c" + encode_tlv(T.NAME, generic("a")) + b"\x16\x00\x17\x03abc",
        b"\x06\x15"
        + encode_tlv(T.NAME, generic("a"))
        + b"\x16\x09\x1b\x01\x05\x1c\x04\x07\x02\x08\x05"
        + b"\x17\x03abc",
    ],
    # fixed ids: the wires carry random nonces and keys, and pytest-xdist's workers must
    # collect the same test names
    ids=["empty", "type-only", "interest", "truncated", "trailing", "no-sigtype", "bad-locator"],
)
def test_malformed_data_raises_validation_error(wire: bytes) -> None:
    with pytest.raises(ValidationError, match="malformed Data"):
        signature_info_of(wire)
    with pytest.raises(ValidationError):
        verify_data(wire, ALICE.public_bytes)


def test_bad_public_key_raises_validation_error() -> None:
    wire = make_data(NAME, b"x", signer=ALICE.signer())
    with pytest.raises(ValidationError, match="not an Ed25519 public key"):
        verify_data(wire, ALICE.public_bytes[:31])
    assert issubclass(ValidationError, SecurityError)


# --- identities and key files ---------------------------------------------------------------


def test_identity_names() -> None:
    assert len(ALICE.public_bytes) == 32
    assert ALICE.fingerprint == hashlib.sha256(ALICE.public_bytes).hexdigest()
    assert ALICE.short_fingerprint == ALICE.fingerprint[:16]
    assert ALICE.key_name == from_uri(f"/icn/key/{ALICE.short_fingerprint}")
    assert key_name_of(ALICE.public_bytes) == ALICE.key_name
    assert ALICE.fingerprint != BOB.fingerprint
    assert repr(ALICE) == f"Identity(/icn/key/{ALICE.short_fingerprint})"


def test_save_writes_0600_in_a_0700_directory(workdir: Path) -> None:
    path = workdir / "keys" / "node.key"
    ALICE.save(path)
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert Identity.load(path).fingerprint == ALICE.fingerprint
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_save_replaces_an_existing_file(workdir: Path) -> None:
    path = workdir / "node.key"
    ALICE.save(path)
    BOB.save(path)
    assert Identity.load(path).fingerprint == BOB.fingerprint
    assert _mode(path) == 0o600


def test_load_or_create_is_idempotent(workdir: Path) -> None:
    path = workdir / "sub" / "node.key"
    first = Identity.load_or_create(path)
    assert _mode(path) == 0o600
    again = Identity.load_or_create(path)
    assert again.fingerprint == first.fingerprint
    assert list(path.parent.iterdir()) == [path]


def test_load_or_create_loses_a_race_gracefully(workdir: Path, monkeypatch: Any) -> None:
    path = workdir / "node.key"
    ALICE.save(path)
    # another process created the file between the existence check and the link
    monkeypatch.setattr(Path, "exists", lambda self: False)
    assert Identity.load_or_create(path).fingerprint == ALICE.fingerprint
    monkeypatch.undo()
    assert list(workdir.iterdir()) == [path]


def test_load_refuses_a_key_others_can_read(workdir: Path) -> None:
    path = workdir / "node.key"
    ALICE.save(path)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"permissions 0644.*chmod 600"):
        Identity.load(path)


def test_load_errors_name_the_file(workdir: Path) -> None:
    missing = workdir / "missing.key"
    with pytest.raises(ConfigError, match=r"missing\.key"):
        Identity.load(missing)
    garbage = workdir / "garbage.key"
    garbage.write_bytes(b"not a key")
    garbage.chmod(0o600)
    with pytest.raises(ConfigError, match=r"garbage\.key is not an unencrypted PEM"):
        Identity.load(garbage)
    ecdsa = workdir / "ecdsa.key"
    ecdsa.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ecdsa.chmod(0o600)
    with pytest.raises(ConfigError, match=r"not an Ed25519 key \(found EC"):
        Identity.load(ecdsa)


# --- public keys and authorized keys --------------------------------------------------------


def test_load_public_key_forms() -> None:
    raw = ALICE.public_bytes
    b64 = base64.b64encode(raw).decode()
    for form in (raw, raw.hex(), raw.hex().upper(), b64, b64.encode(), f"  {b64}\n"):
        assert load_public_key(form) == raw


@pytest.mark.parametrize("bad", [b"", b"x" * 31, "zz" * 32, "ab" * 31, "not base64!", b"\xff" * 40])
def test_load_public_key_refuses_other_values(bad: bytes | str) -> None:
    with pytest.raises(ValidationError, match="not an Ed25519 public key"):
        load_public_key(bad)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_authorized_keys_file(workdir: Path) -> None:
    carol = Identity.generate()
    path = _write(
        workdir / "authorized",
        "# who may call\n"
        f"{ALICE.fingerprint.upper()}   # alice, by fingerprint\n"
        "\n"
        f"{base64.b64encode(BOB.public_bytes).decode()}\n"
        f"ed25519:{carol.public_bytes.hex()}  # carol\n",
    )
    keys = AuthorizedKeys.load(path)
    assert len(keys) == 3
    assert ALICE.fingerprint in keys and BOB.fingerprint in keys and carol.fingerprint in keys
    assert keys.allows(ALICE.public_bytes) and keys.allows(carol.public_bytes)
    assert not keys.allows(Identity.generate().public_bytes)
    assert keys.public_key(BOB.key_name) == BOB.public_bytes
    assert keys.public_key(ALICE.key_name) is None  # a fingerprint alone gives no key
    assert keys.verify_data(make_data(NAME, b"x", signer=carol.signer())) == carol.public_bytes


def test_authorized_keys_verify_data_refuses_unlisted_or_forged(workdir: Path) -> None:
    keys = AuthorizedKeys(fingerprints=[ALICE.fingerprint], public_keys=[BOB.public_bytes])
    with pytest.raises(ValidationError, match=r"/icn/key/.*not an authorized key"):
        keys.verify_data(make_data(NAME, b"x", signer=ALICE.signer()))
    with pytest.raises(ValidationError, match="no key name"):
        keys.verify_data(make_data(NAME, b"x"))
    forged = make_data(NAME, b"x", signer=BOB.signer())[:-64] + bytes(64)
    with pytest.raises(ValidationError, match="does not verify"):
        keys.verify_data(forged)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("abc123", "not an Ed25519 public key"),
        (ALICE.fingerprint[:16], "not an Ed25519 public key"),
        ("ed25519:" + "ab" * 31, "not an Ed25519 public key"),
        (f"{ALICE.fingerprint} {BOB.fingerprint}", "not an Ed25519 public key"),
    ],
    ids=["short-hex", "fingerprint-prefix", "short-key", "two-keys"],  # fixed: keys are random
)
def test_authorized_keys_bad_line_names_file_and_line(workdir: Path, line: str, why: str) -> None:
    path = _write(workdir / "authorized", f"# header\n{ALICE.fingerprint}\n{line}\n")
    with pytest.raises(ConfigError, match=rf"authorized:3: {why}.*64-hex-digit fingerprint"):
        AuthorizedKeys.load(path)


def test_authorized_keys_unreadable_file(workdir: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read authorized keys"):
        AuthorizedKeys.load(workdir / "missing")
    path = workdir / "binary"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        AuthorizedKeys.load(path)
