"""Template encoders and the signer: defaults, the params digest, in-place rewrites, bad input.

Cross-codec equality is in test_codec_properties; here are the rules a reader of make_interest /
make_data relies on, each compared with python-ndn's bytes where python-ndn has the same rule.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ndn.encoding import InterestParam, make_interest
from ndn.security import DigestSha256Signer

from icn.errors import EncodeError
from icn.wire import encode
from icn.wire import tlv_types as T
from icn.wire.name import from_uri, generic, reflexive_component
from icn.wire.packet import parse_data, parse_interest
from icn.wire.signer import DIGEST_SHA256, signature_info_tlv
from icn.wire.tlv import encode_tlv
from tests.unit.icn.test_name import SETTINGS, nonempty_component_lists

NONCE = b"\x01\x02\x03\x04"
NAME = from_uri("/a/b")


def test_default_lifetime_is_omitted() -> None:
    assert encode.make_interest(NAME, nonce=NONCE, lifetime=4000) == encode.make_interest(
        NAME, nonce=NONCE
    )
    assert b"\x0c" not in encode.make_interest(NAME, nonce=NONCE)[len(NAME) + 4 :]
    assert parse_interest(encode.make_interest(NAME, nonce=NONCE, lifetime=3999)).lifetime == 3999


def test_random_nonce_when_none_given() -> None:
    nonces = {parse_interest(encode.make_interest(NAME)).nonce for _ in range(8)}
    assert len(nonces) > 1 and all(n is not None and len(n) == 4 for n in nonces)


@SETTINGS
@given(nonempty_component_lists, st.binary(max_size=50), st.data())
def test_params_digest_filled_in_place_like_python_ndn(
    comps: list[bytes], params: bytes, data: st.DataObject
) -> None:
    # A name taken from a received Interest already holds a digest: it is replaced, not doubled.
    at = data.draw(st.integers(0, len(comps)))
    stale = [*comps[:at], b"\x02\x20" + bytes(32), *comps[at:]]
    wire = encode.make_interest(b"".join(stale), nonce=NONCE, app_params=params)
    param = InterestParam(nonce=0x01020304, lifetime=None)
    assert wire == bytes(make_interest(stale, param, params))
    # and appended when absent, again as python-ndn does
    appended = encode.make_interest(b"".join(comps), nonce=NONCE, app_params=params)
    assert appended == bytes(make_interest(comps, param, params))
    # re-encoding the received name yields the same packet
    iv = parse_interest(appended)
    assert encode.make_interest(iv.name, nonce=NONCE, app_params=params) == appended


def test_params_digest_covers_the_parameters_tlv() -> None:
    iv = parse_interest(encode.make_interest(NAME, nonce=NONCE, app_params=b"xyz"))
    digest = hashlib.sha256(encode_tlv(T.APPLICATION_PARAMETERS, b"xyz")).digest()
    assert iv.name == NAME + b"\x02\x20" + digest and iv.has_params


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"name": b""}, "empty name"),
        ({"nonce": b"\x01\x02\x03"}, "short nonce"),
        ({"nonce": b"\x01\x02\x03\x04\x05"}, "long nonce"),
        ({"hop_limit": 256}, "hop limit too large"),
        ({"hop_limit": -1}, "negative hop limit"),
        ({"name": NAME + b"\x02\x20" + bytes(32)}, "digest without parameters"),
        ({"name": b"\x01\x02ab", "app_params": b""}, "malformed name"),
    ],
)
def test_make_interest_rejects(kwargs: dict[str, object], why: str) -> None:
    args: dict[str, object] = {"name": NAME, "nonce": NONCE} | kwargs
    with pytest.raises(EncodeError):
        encode.make_interest(**args)  # type: ignore[arg-type]


def test_field_order_and_hop_limit() -> None:
    wire = encode.make_interest(
        NAME,
        nonce=NONCE,
        lifetime=10,
        can_be_prefix=True,
        must_be_fresh=True,
        hop_limit=0,
        forwarding_hint=[from_uri("/hint")],
        app_params=b"",
    )
    iv = parse_interest(wire)
    assert (iv.can_be_prefix, iv.must_be_fresh, iv.hop_limit, iv.lifetime) == (True, True, 0, 10)
    assert iv.forwarding_hint == encode_tlv(T.NAME, from_uri("/hint"))
    assert wire.endswith(b"\x24\x00")


def test_with_hop_limit_and_with_nonce() -> None:
    iv = parse_interest(encode.make_interest(NAME, nonce=NONCE, hop_limit=9, lifetime=100))
    lowered = parse_interest(iv.with_hop_limit(8))
    assert (lowered.hop_limit, lowered.nonce, lowered.lifetime) == (8, NONCE, 100)
    renonced = parse_interest(iv.with_nonce(b"wxyz"))
    assert (renonced.nonce, renonced.hop_limit, renonced.lifetime) == (b"wxyz", 9, 100)


@pytest.mark.parametrize("fh", [None, [from_uri("/h")]])
@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_with_nonce_inserts_where_the_encoder_would(
    fh: list[bytes] | None, flags: tuple[bool, bool]
) -> None:
    # An Interest without Nonce (python-ndn can send one): the inserted Nonce lands in its place.
    cbp, mbf = flags
    param = InterestParam(can_be_prefix=cbp, must_be_fresh=mbf, lifetime=100, hop_limit=3)
    param.forwarding_hint = [[generic("h")]] if fh else []
    without = bytes(make_interest([generic("a"), generic("b")], param))
    iv = parse_interest(without)
    assert iv.nonce is None and iv.nonce_pos == -1
    expected = encode.make_interest(
        NAME,
        nonce=NONCE,
        lifetime=100,
        hop_limit=3,
        can_be_prefix=cbp,
        must_be_fresh=mbf,
        forwarding_hint=fh,
    )
    assert iv.with_nonce(NONCE) == expected


@pytest.mark.parametrize(
    ("comp", "typ"),
    [
        (generic("x"), T.COMP_GENERIC),
        (reflexive_component(bytes(16)), T.COMP_REFLEXIVE),
        (encode_tlv(300, b"v"), 300),
        (encode_tlv(65535, b""), 65535),
    ],
)
def test_last_component_type(comp: bytes, typ: int) -> None:
    iv = parse_interest(encode.make_interest(NAME + comp, nonce=NONCE))
    assert iv.last_component_type == typ


def test_make_data_fields() -> None:
    fbi = b"\x32\x01\x07"
    wire = encode.make_data(
        NAME, b"c", freshness=0, content_type=T.CONTENT_KEY, final_block_id=fbi, signer=None
    )
    dv = parse_data(wire)
    assert (dv.freshness, dv.content_type) == (0, T.CONTENT_KEY)
    assert wire == encode_tlv(
        T.DATA,
        encode_tlv(T.NAME, NAME)
        + encode_tlv(T.META_INFO, b"\x18\x01\x02\x19\x01\x00\x1a\x03" + fbi)
        + encode_tlv(T.CONTENT, b"c"),
    )
    # BLOB is the default: no ContentType, and no MetaInfo when nothing else is set
    blob = encode.make_data(NAME, b"", content_type=T.CONTENT_BLOB, signer=None)
    assert blob == encode_tlv(T.DATA, encode_tlv(T.NAME, NAME) + b"\x15\x00")


@pytest.mark.parametrize("signer", ["none", "digest", "ed25519"])
def test_data_parts_are_the_packet_with_the_content_left_in_place(signer: str) -> None:
    from icn.dataplane.segments import data_content
    from icn.security.keys import Identity, verify_data

    ident = Identity.generate()
    signers = {"none": None, "digest": DIGEST_SHA256, "ed25519": ident.signer()}
    blob = bytes(range(256)) * 40
    view = memoryview(blob)[100:9000]
    fbi = b"\x32\x01\x07"
    parts = encode.data_parts(NAME, view, freshness=5, final_block_id=fbi, signer=signers[signer])
    assert parts.content is view  # not copied
    wire = parts.join()
    assert parts.size == len(wire) and wire[:1] == b"\x06"
    if signer == "ed25519":
        verify_data(wire, ident.public_bytes)
    else:  # deterministic: the same bytes as make_data
        expect = encode.make_data(
            NAME, bytes(view), freshness=5, final_block_id=fbi, signer=signers[signer]
        )
        assert wire == expect
    assert data_content(parse_data(wire)) == bytes(view)


@pytest.mark.parametrize("signer", ["none", "digest", "ed25519"])
def test_a_lead_starts_the_content_and_leaves_the_payload_in_place(signer: str) -> None:
    from icn.dataplane.segments import data_content
    from icn.security.keys import Identity, verify_data

    ident = Identity.generate()
    signers = {"none": None, "digest": DIGEST_SHA256, "ed25519": ident.signer()}
    payload = memoryview(bytes(range(256)) * 40)[7:9000]
    parts = encode.data_parts(NAME, payload, lead=b"hdr:", signer=signers[signer])
    assert parts.content is payload and parts.head.endswith(b"hdr:")
    wire = parts.join()
    assert parts.size == len(wire)
    if signer == "ed25519":
        verify_data(wire, ident.public_bytes)
    else:  # the same packet as the joined Content would make
        assert wire == encode.make_data(NAME, b"hdr:" + bytes(payload), signer=signers[signer])
    assert data_content(parse_data(wire)) == b"hdr:" + bytes(payload)


def test_digest_signer() -> None:
    assert DIGEST_SHA256.signature_info() == b"\x1b\x01\x00"
    assert signature_info_tlv(DIGEST_SHA256) == b"\x16\x03\x1b\x01\x00"
    assert DIGEST_SHA256.sign(b"abc") == hashlib.sha256(b"abc").digest()
    wire = encode.make_data(NAME, b"x")
    body_start = 2
    assert wire[-32:] == hashlib.sha256(wire[body_start:-34]).digest()
    # python-ndn's DigestSha256 signer writes the same SignatureInfo
    py = bytes(
        make_interest("/a", InterestParam(nonce=1), b"", DigestSha256Signer(for_interest=False))
    )
    assert b"\x2c\x03\x1b\x01\x00" in py


def test_nni_reexport() -> None:
    assert encode.nni(256) == b"\x01\x00"
