"""Specification vectors (an Interest and its NDNLPv2 Nack, from the packet grammars): decode
to the expected fields, and the encoders rebuild the same bytes.  python-ndn is asked too, so a
vector typo cannot hide."""

from __future__ import annotations

import hashlib

from ndn.encoding import InterestParam, MetaInfo, make_data, make_interest, make_network_nack
from ndn.security import DigestSha256Signer

from icn.wire import encode
from icn.wire import tlv_types as T
from icn.wire.lp import encode_lp, encode_nack, parse_lp
from icn.wire.name import from_uri
from icn.wire.packet import packet_type, parse_data, parse_interest

NDN_TEST = bytes.fromhex("08036e646e080474657374")  # /ndn/test

INTEREST_1 = bytes.fromhex("051b 070b 08036e646e080474657374 2100 1200 0a0401020304 0c0203e8")
DATA_1 = bytes.fromhex(
    "063e 070b08036e646e080474657374 1404190203e8 15026869 16031b0100 1720"
    "8a9261b3ccb9e019c2f28832237d830b60de85d48629e217c8508fd9982d4862"
)
DATA_1_DIGEST = bytes.fromhex("82a905dc0243a7912803616dea3f6a15ab396340111fcc4d3331945d38851f7c")
PARAMS_DIGEST = bytes.fromhex("6dd311d9f98a46a7dbebc7c49468696d6271bfa90f44ee9d05862b46cd82dedb")
INTEREST_PARAMS = bytes.fromhex(
    "0531 0725 080166 0220" + PARAMS_DIGEST.hex() + "0a0401020304 24020102"
)
NACK_NO_ROUTE = bytes.fromhex("6428 fd032005 fd03210196 501d") + INTEREST_1
WITH_PIT_TOKEN = bytes.fromhex("6425 6204a1b2c3d4 501d") + INTEREST_1


def test_interest_vector_decodes() -> None:
    iv = parse_interest(INTEREST_1)
    assert iv.name == NDN_TEST
    assert iv.name_ends == [5, 11]
    assert iv.can_be_prefix and iv.must_be_fresh
    assert iv.nonce == b"\x01\x02\x03\x04"
    assert iv.lifetime == 1000
    assert iv.hop_limit is None and iv.forwarding_hint is None and not iv.has_params
    assert INTEREST_1[iv.nonce_pos : iv.nonce_pos + 4] == b"\x01\x02\x03\x04"
    assert packet_type(INTEREST_1) == T.INTEREST


def test_interest_vector_encodes() -> None:
    wire = encode.make_interest(
        from_uri("/ndn/test"),
        nonce=b"\x01\x02\x03\x04",
        lifetime=1000,
        can_be_prefix=True,
        must_be_fresh=True,
    )
    assert wire == INTEREST_1
    param = InterestParam(can_be_prefix=True, must_be_fresh=True, nonce=0x01020304, lifetime=1000)
    assert bytes(make_interest("/ndn/test", param)) == INTEREST_1


def test_data_vector_decodes_and_verifies() -> None:
    dv = parse_data(DATA_1)
    assert dv.name == NDN_TEST
    assert dv.freshness == 1000
    assert dv.content_type == T.CONTENT_BLOB
    assert dv.implicit_digest == DATA_1_DIGEST == hashlib.sha256(DATA_1).digest()
    assert dv.full_name == NDN_TEST + b"\x01\x20" + DATA_1_DIGEST
    # DigestSha256: the value is SHA-256 of Name..SignatureInfo (without the outer T/L).
    assert DATA_1[-32:] == hashlib.sha256(DATA_1[2:-34]).digest()
    assert packet_type(DATA_1) == T.DATA


def test_data_vector_encodes() -> None:
    assert encode.make_data(from_uri("/ndn/test"), b"hi", freshness=1000) == DATA_1
    assert encode.DataTemplate(freshness=1000).build(NDN_TEST, b"hi") == DATA_1
    meta = MetaInfo(content_type=None, freshness_period=1000)
    assert bytes(make_data("/ndn/test", meta, b"hi", DigestSha256Signer())) == DATA_1


def test_params_interest_vector() -> None:
    assert hashlib.sha256(bytes.fromhex("24020102")).digest() == PARAMS_DIGEST
    iv = parse_interest(INTEREST_PARAMS)
    assert iv.has_params
    assert iv.name == b"\x08\x01f\x02\x20" + PARAMS_DIGEST
    assert iv.last_component_type == T.COMP_PARAMS_DIGEST
    assert iv.nonce == b"\x01\x02\x03\x04" and iv.lifetime == T.DEFAULT_INTEREST_LIFETIME_MS
    wire = encode.make_interest(from_uri("/f"), nonce=b"\x01\x02\x03\x04", app_params=b"\x01\x02")
    assert wire == INTEREST_PARAMS
    param = InterestParam(nonce=0x01020304, lifetime=None)
    assert bytes(make_interest("/f", param, b"\x01\x02")) == INTEREST_PARAMS


def test_nack_vector() -> None:
    lp = parse_lp(NACK_NO_ROUTE)
    assert lp.nack_reason == T.NACK_NO_ROUTE
    assert lp.fragment == INTEREST_1
    assert lp.pit_token is None and lp.sequence is None
    assert (lp.frag_index, lp.frag_count, lp.congestion_mark) == (0, 1, 0)
    assert encode_nack(INTEREST_1, T.NACK_NO_ROUTE) == NACK_NO_ROUTE
    assert bytes(make_network_nack(INTEREST_1, T.NACK_NO_ROUTE)) == NACK_NO_ROUTE
    assert packet_type(NACK_NO_ROUTE) == T.LP_PACKET


def test_pit_token_vector() -> None:
    lp = parse_lp(WITH_PIT_TOKEN)
    assert lp.pit_token == bytes.fromhex("a1b2c3d4")
    assert lp.nack_reason is None
    assert lp.fragment == INTEREST_1
    assert encode_lp(INTEREST_1, pit_token=bytes.fromhex("a1b2c3d4")) == WITH_PIT_TOKEN


def test_packet_type_of_nothing() -> None:
    assert packet_type(b"") == 0
