"""signature_type, what fetch_signed reads to tell a manifested object's segments apart: the
type of a well-formed SignatureInfo, and None (never an exception) for a malformed one, so the
signature check names what is wrong."""

from __future__ import annotations

from icn.dataplane.segments import signature_type
from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.packet import parse_data
from icn.wire.signer import DIGEST_SHA256, NULL_SIGNATURE

NAME = b"\x08\x01a"


def test_the_type_of_a_well_formed_signature_info() -> None:
    assert signature_type(parse_data(make_data(NAME, b"x"))) == T.SIG_DIGEST_SHA256
    assert signature_type(parse_data(make_data(NAME, b"x", signer=NULL_SIGNATURE))) == 200


def test_a_malformed_signature_info_gives_none() -> None:
    wire = bytearray(make_data(NAME, b"x", signer=DIGEST_SHA256))
    dv = parse_data(bytes(wire))
    wire[dv.sig_info_start + 1] = 0x7F  # SignatureType's length runs past SignatureInfo
    assert signature_type(parse_data(bytes(wire))) is None
