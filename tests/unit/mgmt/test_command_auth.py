"""Command Interest parsing and freshness checks, against commands built by python-ndn.

python-ndn sends both forms NFD accepts: ``make_command`` (v1 API, signature in the name) and
``make_command_v2`` + a v0.3 signed Interest (appv2, pynfdc).  Hand-built v2 packets cover the
malformed signature fields python-ndn cannot produce; a seeded fuzz run checks that only
DecodeError or CommandRejected ever come out.
"""

from __future__ import annotations

import hashlib
import random
import struct
import time
from collections import Counter
from typing import Any

import pytest
from Cryptodome.PublicKey import ECC
from ndn.app_support.nfd_mgmt import (
    ControlParameters,
    ControlParametersValue,
    make_command,
    make_command_v2,
)
from ndn.encoding import Component, InterestParam, Name, SignatureInfo, Signer, make_interest
from ndn.security import DigestSha256Signer, HmacSha256Signer, Sha256WithEcdsaSigner

from forwarder.mgmt.command_auth import (
    DIGEST_KEY_NAME,
    CommandRejected,
    CommandValidator,
    SignedCommand,
    parse_command,
)
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.name import from_uri, generic
from icn.wire.tlv import encode_nni_tlv, encode_tlv, iter_tlvs, read_tl
from tests.fuzz_packets import Mutator, seeds

NOW = 1_700_000_000_000
PARAM = InterestParam(lifetime=1000, nonce=0x01020304)
KEY = "/op/KEY/%01%02"
ECDSA_DER = ECC.generate(curve="P-256").export_key(format="DER")


class Fresh(Signer):  # type: ignore[misc]  # python-ndn is untyped
    """A python-ndn signer with SignatureTime and SignatureNonce set (None leaves one out)."""

    def __init__(
        self, inner: Any, time_ms: int | None = NOW, nonce: int | None = 0xABCDEF0102
    ) -> None:
        self.inner, self.time_ms, self.nonce = inner, time_ms, nonce

    def write_signature_info(self, signature_info: Any) -> None:
        self.inner.write_signature_info(signature_info)
        signature_info.signature_time = self.time_ms
        signature_info.signature_nonce = self.nonce

    def get_signature_value_size(self) -> int:
        return int(self.inner.get_signature_value_size())

    def write_signature_value(self, wire: Any, contents: Any) -> int:
        return int(self.inner.write_signature_value(wire, contents))


def cp_tlv(**kwargs: Any) -> bytes:
    cp = ControlParameters()
    cp.cp = ControlParametersValue()
    for k, v in kwargs.items():
        setattr(cp.cp, k, v)
    return bytes(cp.encode())


def v1_name(signer: Any = None, name: list[Any] | None = None) -> list[Any]:
    """python-ndn's own v1 command name, or the same layout signed by ``signer``."""
    if signer is None:
        return list(make_command("rib", "register", name="/example/app"))
    name = list(name or make_command_v2("rib", "register", name="/example/app"))
    name += [Component.from_bytes(struct.pack("!Q", NOW)), Component.from_bytes(b"nonce-v1")]
    info = SignatureInfo()
    signer.write_signature_info(info)
    name.append(Component.from_bytes(encode_tlv(T.SIGNATURE_INFO, bytes(info.encode()))))
    value = bytearray(signer.get_signature_value_size())
    size = signer.write_signature_value(value, name)
    name.append(Component.from_bytes(encode_tlv(T.SIGNATURE_VALUE, value[:size])))
    return name


def v1(name: list[Any] | None = None, signer: Any = None) -> bytes:
    return bytes(make_interest(name or v1_name(signer), PARAM))


def v2(signer: Any = None, name: list[Any] | None = None, app_param: bytes = b"") -> bytes:
    name = list(name) if name else make_command_v2("rib", "register", name="/example/app")
    signer = signer or DigestSha256Signer(for_interest=True)
    return bytes(make_interest(name, PARAM, app_param=app_param, signer=signer))


def v2_raw(
    info: bytes, comps: bytes | None = None, with_value: bool = True, suffix: bytes = b""
) -> bytes:
    """A v0.3 signed command built by hand, ISigInfo value ``info``, DigestSha256 signature;
    ``suffix`` components go after the ParametersSha256Digest component."""
    if comps is None:
        comps = from_uri("/localhost/nfd/rib/register") + generic(cp_tlv(name="/a"))
    head = b"\x24\x00" + encode_tlv(T.INTEREST_SIGNATURE_INFO, info)
    value = encode_tlv(T.INTEREST_SIGNATURE_VALUE, hashlib.sha256(comps + suffix + head).digest())
    block = head + value if with_value else head
    name = comps + encode_tlv(T.COMP_PARAMS_DIGEST, hashlib.sha256(block).digest()) + suffix
    return encode_tlv(T.INTEREST, encode_tlv(T.NAME, name) + block)


DIGEST_INFO = encode_nni_tlv(T.SIGNATURE_TYPE, 0)
TIME_NONCE = encode_tlv(T.SIGNATURE_NONCE, b"12345678") + encode_nni_tlv(T.SIGNATURE_TIME, NOW)


def fix_params_digest(wire: bytes) -> bytes:
    """Recompute the ParametersSha256Digest (last component) after tampering with the params."""
    _, off, end = read_tl(wire, 0, len(wire))
    nend = read_tl(wire, off, end)[2]
    at = next(vs for t, vs, _ in iter_tlvs(wire, nend, end) if t == T.APPLICATION_PARAMETERS) - 2
    return wire[: nend - 32] + hashlib.sha256(wire[at:]).digest() + wire[nend:]


def rejected(wire: bytes, words: str) -> None:
    with pytest.raises(CommandRejected) as info:
        parse_command(wire)
    assert info.value.status == 403
    assert words in info.value.text


# --- parsing: both forms, several signature types


def test_v1_from_python_ndn() -> None:
    name = v1_name()
    cmd = parse_command(v1(name))
    assert cmd.form == "v1"
    assert cmd.params == cp_tlv(name="/example/app")
    assert cmd.key_name == DIGEST_KEY_NAME == from_uri("/localhost/identity/digest-sha256")
    assert cmd.signature_time_ms == struct.unpack("!Q", Component.get_value(name[-4]))[0]
    assert abs(cmd.signature_time_ms - time.time() * 1000) < 60_000
    assert cmd.signature_nonce == bytes(Component.get_value(name[-3]))


def test_v2_from_python_ndn() -> None:
    cmd = parse_command(v2())
    assert (cmd.form, cmd.params, cmd.key_name) == (
        "v2",
        cp_tlv(name="/example/app"),
        DIGEST_KEY_NAME,
    )
    assert abs(cmd.signature_time_ms - time.time() * 1000) < 60_000
    fixed = parse_command(v2(Fresh(DigestSha256Signer(), NOW, 0x0102030405060708)))
    assert fixed.signature_time_ms == NOW
    assert fixed.signature_nonce == bytes.fromhex("0102030405060708")


class _RemoteFace:
    def isLocalFace(self) -> bool:  # python-ndn asks the face this
        return False


@pytest.mark.parametrize(
    ("module", "verb", "kwargs"),
    [
        ("rib", "unregister", {"name": "/", "face_id": 300}),
        ("faces", "destroy", {"face_id": 7}),
        ("strategy-choice", "set", {"name": "/a", "strategy": "/localhost/nfd/strategy/x"}),
    ],
)
def test_other_commands_and_localhop(module: str, verb: str, kwargs: dict[str, Any]) -> None:
    name = make_command_v2(module, verb, _RemoteFace(), **kwargs)
    assert Name.to_str(name[:1]) == "/localhop"
    expected = bytes(Component.get_value(name[4]))
    assert parse_command(v2(name=name)).params == expected
    assert parse_command(v1(v1_name(DigestSha256Signer(), name))).params == expected


@pytest.mark.parametrize("form", ["v1", "v2"])
@pytest.mark.parametrize(
    "inner", [Sha256WithEcdsaSigner(KEY, ECDSA_DER), HmacSha256Signer(KEY, b"k" * 32)]
)
def test_keyed_signature_with_key_locator_is_accepted(form: str, inner: Any) -> None:
    cmd = parse_command(v1(v1_name(inner)) if form == "v1" else v2(Fresh(inner)))
    assert (cmd.form, cmd.key_name) == (form, bytes(b"".join(Name.from_str(KEY))))
    assert cmd.params == cp_tlv(name="/example/app")


def test_v2_without_command_parameters_has_none() -> None:
    cmd = parse_command(v2(name=Name.from_str("/localhost/nfd/faces/update")))
    assert cmd.params is None and cmd.form == "v2"


# --- rejections (403)


def test_tampered_v1_signature_value() -> None:
    name = make_command("rib", "register", name="/example/app")
    value = bytearray(Component.get_value(name[-1]))
    value[-1] ^= 1
    name[-1] = Component.from_bytes(value)
    rejected(v1(name), "signature does not match")


def test_tampered_v1_signed_component() -> None:
    name = make_command("rib", "register", name="/example/app")
    name[4] = Component.from_bytes(cp_tlv(name="/evil/app"))
    rejected(v1(name), "signature does not match")


def test_tampered_v2_application_parameters() -> None:
    wire = bytearray(v2(app_param=b"x"))
    wire[wire.index(b"\x24\x01x") + 2] = ord("y")
    rejected(bytes(wire), "ParametersSha256Digest does not match")
    # With the digest component fixed up the signature itself no longer matches.
    rejected(fix_params_digest(bytes(wire)), "DigestSha256 signature does not match")


def test_wrong_params_digest_and_signature_value() -> None:
    wire = v2()
    nend = read_tl(wire, 2, len(wire))[2]
    rejected(wire[: nend - 1] + bytes([wire[nend - 1] ^ 1]) + wire[nend:], "ParametersSha256")
    rejected(fix_params_digest(wire[:-1] + bytes([wire[-1] ^ 1])), "signature does not match")


def test_unsigned_commands() -> None:
    name = make_command_v2("rib", "register", name="/example/app")
    rejected(bytes(make_interest(name, PARAM)), "not signed")
    rejected(bytes(make_interest(name, PARAM, app_param=b"")), "not signed")
    rejected(v2_raw(DIGEST_INFO + TIME_NONCE, with_value=False), "InterestSignatureValue missing")


@pytest.mark.parametrize(
    ("signer", "words"),
    [
        (Fresh(DigestSha256Signer(), time_ms=None), "SignatureTime missing"),
        (Fresh(DigestSha256Signer(), nonce=None), "SignatureNonce missing"),
        (Fresh(Sha256WithEcdsaSigner(KEY, ECDSA_DER), nonce=None), "SignatureNonce missing"),
    ],
)
def test_v2_needs_time_and_nonce(signer: Any, words: str) -> None:
    rejected(v2(signer), words)


def test_v2_raw_helper_builds_a_valid_command() -> None:
    cmd = parse_command(v2_raw(DIGEST_INFO + TIME_NONCE))
    assert (cmd.signature_time_ms, cmd.signature_nonce) == (NOW, b"12345678")


def test_optional_and_non_critical_signature_fields_are_accepted() -> None:
    extra = encode_nni_tlv(T.SIGNATURE_SEQ_NUM, 9) + encode_tlv(0x80, b"x")
    assert parse_command(v2_raw(DIGEST_INFO + TIME_NONCE + extra)).signature_nonce == b"12345678"


def test_params_digest_must_be_last() -> None:
    rejected(v2_raw(DIGEST_INFO + TIME_NONCE, suffix=generic(b"x")), "must be the last")


ECDSA = encode_nni_tlv(T.SIGNATURE_TYPE, T.SIG_SHA256_WITH_ECDSA)


@pytest.mark.parametrize(
    ("info", "words"),
    [
        (ECDSA + TIME_NONCE, "KeyLocator Name required"),
        (
            ECDSA + encode_tlv(T.KEY_LOCATOR, encode_tlv(T.KEY_DIGEST, bytes(32))) + TIME_NONCE,
            "Name",
        ),
        (ECDSA + encode_tlv(T.KEY_LOCATOR, b"\x07\x03\x08\x05a") + TIME_NONCE, "malformed"),
        (ECDSA + encode_tlv(T.KEY_LOCATOR, encode_tlv(0x80, b"x")) + TIME_NONCE, "malformed"),
        (encode_nni_tlv(T.SIGNATURE_TYPE, 2) + TIME_NONCE, "unsupported SignatureType 2"),
        (TIME_NONCE + DIGEST_INFO, "must start with SignatureType"),
        (DIGEST_INFO + TIME_NONCE + encode_tlv(T.SIGNATURE_NONCE, b"x"), "duplicate"),
        (DIGEST_INFO + TIME_NONCE + encode_tlv(0x81, b""), "unexpected critical"),
        (DIGEST_INFO + encode_tlv(T.SIGNATURE_NONCE, b"") + TIME_NONCE[10:], "empty"),
        (DIGEST_INFO + TIME_NONCE[:10] + encode_tlv(T.SIGNATURE_TIME, b"abc"), "3 octets"),
        (DIGEST_INFO + TIME_NONCE + encode_tlv(T.SIGNATURE_SEQ_NUM, b"abc"), "3 octets"),
        (b"", "malformed"),
    ],
)
def test_malformed_signature_info(info: bytes, words: str) -> None:
    rejected(v2_raw(info), words)


@pytest.mark.parametrize(
    ("index", "component"),
    [
        (-4, Component.from_bytes(b"abc")),  # timestamp is not an NNI
        (-3, Component.from_bytes(b"")),  # empty nonce
        (-2, Component.from_bytes(encode_tlv(T.SIGNATURE_INFO, DIGEST_INFO), typ=9)),
        (-2, Component.from_bytes(encode_tlv(T.SIGNATURE_VALUE, DIGEST_INFO))),
        (-1, Component.from_bytes(encode_tlv(T.SIGNATURE_VALUE, bytes(32)) + b"\x00")),
    ],
)
def test_malformed_v1_signature_components(index: int, component: bytearray) -> None:
    name = v1_name(DigestSha256Signer())
    parse_command(v1(name))
    name[index] = component
    rejected(v1(name), "malformed")


# --- unparsable input (DecodeError: dropped without a reply)


@pytest.mark.parametrize(
    "component",
    [
        generic(b"garbage"),
        generic(b"\x68\x05ab"),
        generic(b"\x07\x00"),
        generic(b"\x68\x02\x07\x00\x00"),
        generic(b"\x68\x03\x07\x05a"),
        encode_tlv(T.COMP_VERSION, cp_tlv(name="/a")),
    ],
)
def test_garbage_control_parameters(component: bytes) -> None:
    comps = from_uri("/localhost/nfd/rib/register") + component
    with pytest.raises(DecodeError):
        parse_command(v2_raw(DIGEST_INFO + TIME_NONCE, comps=comps))
    parse_command(v2_raw(DIGEST_INFO + TIME_NONCE))


@pytest.mark.parametrize("wire", [b"", b"\x06\x00", v2()[:-1], b"\x05\x02\x07\x00"])
def test_not_an_interest(wire: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_command(wire)


# --- the validator


def cmd(t: int = NOW, nonce: bytes = b"n", key: bytes = b"k") -> SignedCommand:
    return SignedCommand(None, key, t, nonce, "v2")


def validator(**kwargs: Any) -> tuple[CommandValidator, list[int]]:
    clock = [NOW]
    return CommandValidator(wall_clock_ms=lambda: clock[0], **kwargs), clock


def refused(v: CommandValidator, c: SignedCommand, counter: str) -> None:
    before = v.counters[counter]
    with pytest.raises(CommandRejected) as info:
        v.check(c)
    assert info.value.status == 403
    assert v.counters[counter] == before + 1


@pytest.mark.parametrize("offset", [-120_001, 120_001, -(10**9), 10**9])
def test_time_outside_window(offset: int) -> None:
    v, _ = validator()
    refused(v, cmd(NOW + offset), "mgmt.auth_stale")
    v.check(cmd(NOW + (120_000 if offset > 0 else -120_000)))
    assert v.counters["mgmt.auth_ok"] == 1


def test_replayed_nonce() -> None:
    counters: Counter[str] = Counter()
    v, _ = validator(counters=counters)
    v.check(cmd(NOW, b"a"))
    refused(v, cmd(NOW + 1, b"a"), "mgmt.auth_replay")
    v.check(cmd(NOW, b"a", key=b"other"))  # nonces are remembered per key, as in ndn-cxx
    assert counters["mgmt.auth_ok"] == 2


def test_time_must_increase_per_key() -> None:
    v, _ = validator()
    v.check(cmd(NOW, b"1"))
    refused(v, cmd(NOW, b"2"), "mgmt.auth_not_increasing")
    refused(v, cmd(NOW - 1, b"3"), "mgmt.auth_not_increasing")
    v.check(cmd(NOW, b"4", key=b"other"))
    v.check(cmd(NOW + 1, b"5"))


def test_rejected_commands_are_not_remembered() -> None:
    v, _ = validator()
    refused(v, cmd(NOW + 10**6, b"x"), "mgmt.auth_stale")
    v.check(cmd(NOW, b"x"))


def test_key_memory_is_bounded() -> None:
    v, _ = validator(max_keys=8)
    for i in range(1000):
        v.check(cmd(NOW, b"n", key=b"key%d" % i))
    assert len(v._keys) == 8
    v.check(cmd(NOW - 5, b"m", key=b"key0"))  # evicted: its last time is forgotten
    refused(v, cmd(NOW, b"m", key=b"key999"), "mgmt.auth_not_increasing")


def test_nonce_memory_is_bounded() -> None:
    v, _ = validator(max_nonces=16)
    for i in range(1000):
        v.check(cmd(NOW - 60_000 + i, b"%d" % i))
    assert len(v._nonces) == 16
    refused(v, cmd(NOW + 1, b"999"), "mgmt.auth_replay")


def test_nonces_older_than_the_window_are_forgotten() -> None:
    v, clock = validator()
    for i in range(5):
        v.check(cmd(NOW + i, b"%d" % i))
    clock[0] = NOW + 120_005
    v.check(cmd(clock[0], b"new"))
    assert len(v._nonces) == 1


@pytest.mark.parametrize("make", [v1, v2])
def test_python_ndn_command_replayed_byte_for_byte(make: Any) -> None:
    v = CommandValidator()
    wire = make()
    v.check(parse_command(wire))
    with pytest.raises(CommandRejected):
        v.check(parse_command(wire))
    assert (v.counters["mgmt.auth_ok"], v.counters["mgmt.auth_replay"]) == (1, 1)


# --- fuzz


def test_fuzz_only_decode_error_or_rejection() -> None:
    ecdsa = Sha256WithEcdsaSigner(KEY, ECDSA_DER)
    corpus = [v1(), v2(), v1(v1_name(ecdsa)), v2(Fresh(ecdsa)), v2_raw(DIGEST_INFO + TIME_NONCE)]
    corpus.append(v2(Fresh(DigestSha256Signer()), app_param=b"\x80\x02ab"))
    corpus += seeds()[:6]  # plain Interests from the codec fuzz: not commands at all
    mutator = Mutator(random.Random(0xC0DE), corpus)
    v, _ = validator(max_keys=4, max_nonces=8)
    outcomes: Counter[str] = Counter()
    for _ in range(20_000):
        wire = mutator.next()
        try:
            command = parse_command(wire)
            outcomes["parsed"] += 1
            v.check(command)
        except DecodeError:
            outcomes["decode"] += 1
        except CommandRejected as exc:
            assert exc.status == 403
            outcomes["rejected"] += 1
    # The mutations must reach past the outer header into the signature and freshness checks.
    assert min(outcomes["rejected"], outcomes["decode"], outcomes["parsed"]) > 500, outcomes
