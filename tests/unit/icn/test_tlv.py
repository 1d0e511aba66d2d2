"""TLV primitives (VAR-NUMBER, NNI, critical rule) and the evolvability rules on whole packets.

Packets here are built by hand from hex so that each test says exactly which bytes break which
rule; the valid baselines parse, so a rejection is due to the one change the test makes.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ndn.encoding import pack_uint_bytes, parse_tl_num, write_tl_num

from icn.errors import DecodeError, EncodeError
from icn.wire.packet import parse_data, parse_interest
from icn.wire.tlv import (
    encode_nni,
    encode_nni_tlv,
    encode_tlv,
    encode_varnum,
    frame_length,
    is_critical,
    iter_tlvs,
    read_nni,
    read_tl,
    read_varnum,
)

VARNUM_CASES = [
    (0, "00"),
    (252, "fc"),
    (253, "fd00fd"),
    (1024, "fd0400"),
    (65535, "fdffff"),
    (65536, "fe00010000"),
    (2**32 - 1, "feffffffff"),
    (2**32, "ff0000000100000000"),
    (2**64 - 1, "ffffffffffffffffff"),
]


@pytest.mark.parametrize(("value", "wire"), VARNUM_CASES)
def test_varnum_boundaries(value: int, wire: str) -> None:
    raw = bytes.fromhex(wire)
    assert encode_varnum(value) == raw
    assert read_varnum(raw, 0, len(raw)) == (value, len(raw))
    # at an offset inside a larger buffer, with trailing bytes left alone
    assert read_varnum(b"\x99" + raw + b"\x01", 1, len(raw) + 2) == (value, len(raw) + 1)


@pytest.mark.parametrize(
    "wire", ["fd00fc", "fd0000", "fe0000fffe", "fe00000000", "ff00000000ffffffff", "ff" + "00" * 8]
)
def test_non_minimal_varnum_rejected(wire: str) -> None:
    raw = bytes.fromhex(wire)
    with pytest.raises(DecodeError, match="non-minimal"):
        read_varnum(raw, 0, len(raw))


@pytest.mark.parametrize("wire", ["", "fd", "fd01", "fe000100", "ff0000000100"])
def test_truncated_varnum_rejected(wire: str) -> None:
    raw = bytes.fromhex(wire)
    with pytest.raises(DecodeError, match="truncated"):
        read_varnum(raw, 0, len(raw))


def test_varnum_end_bound_is_respected() -> None:
    # The bytes exist in the buffer but lie beyond `end`.
    with pytest.raises(DecodeError):
        read_varnum(b"\xfd\x01\x00", 0, 2)


@pytest.mark.parametrize("value", [-1, 2**64])
def test_encode_varnum_out_of_range(value: int) -> None:
    with pytest.raises(EncodeError):
        encode_varnum(value)


@given(st.integers(0, 2**64 - 1))
def test_varnum_matches_python_ndn(value: int) -> None:
    wire = encode_varnum(value)
    buf = bytearray(9)
    size = write_tl_num(value, buf, 0)
    assert wire == bytes(buf[:size])
    assert parse_tl_num(wire, 0) == (value, len(wire))
    assert read_varnum(wire, 0, len(wire)) == (value, len(wire))


NNI_CASES = [
    (0, "00"),
    (255, "ff"),
    (256, "0100"),
    (65535, "ffff"),
    (65536, "00010000"),
    (2**32 - 1, "ffffffff"),
    (2**32, "0000000100000000"),
    (2**64 - 1, "ffffffffffffffff"),
]


@pytest.mark.parametrize(("value", "wire"), NNI_CASES)
def test_nni_smallest_width(value: int, wire: str) -> None:
    raw = bytes.fromhex(wire)
    assert encode_nni(value) == raw
    assert read_nni(raw, 0, len(raw)) == value


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_nni_widths_accepted_even_if_not_smallest(width: int) -> None:
    raw = b"\x00" * (width - 1) + b"\x07"
    assert read_nni(b"\xee" + raw, 1, 1 + width) == 7


@pytest.mark.parametrize("width", [0, 3, 5, 6, 7, 9])
def test_nni_other_widths_rejected(width: int) -> None:
    with pytest.raises(DecodeError):
        read_nni(b"\x01" * width, 0, width)


@pytest.mark.parametrize("value", [-1, 2**64])
def test_encode_nni_out_of_range(value: int) -> None:
    with pytest.raises(EncodeError):
        encode_nni(value)


@given(st.integers(0, 2**64 - 1))
def test_nni_matches_python_ndn(value: int) -> None:
    assert encode_nni(value) == pack_uint_bytes(value)
    assert read_nni(encode_nni(value), 0, len(encode_nni(value))) == value
    assert encode_nni_tlv(25, value) == b"\x19" + bytes((len(encode_nni(value)),)) + encode_nni(
        value
    )


@pytest.mark.parametrize(
    ("typ", "critical"),
    [
        (0, True),
        (1, True),
        (8, True),
        (30, True),
        (31, True),
        (32, False),
        (33, True),
        (34, False),
        (128, False),
        (129, True),
        (252, False),
        (253, True),
        (800, False),
        (801, True),
        (65534, False),
        (65535, True),
    ],
)
def test_critical_rule(typ: int, critical: bool) -> None:
    assert is_critical(typ) is critical


def test_read_tl_fast_and_slow_paths() -> None:
    assert read_tl(b"\x08\x02ab", 0, 4) == (8, 2, 4)
    long_value = b"x" * 300
    wire = encode_tlv(1000, long_value)
    assert wire[:6] == bytes.fromhex("fd03e8fd012c")
    assert read_tl(wire, 0, len(wire)) == (1000, 6, 306)
    assert encode_tlv(7) == b"\x07\x00"


@pytest.mark.parametrize(
    "wire",
    [
        "0001ff",  # type 0
        "fd00000100",  # type 0 in the 3-octet form (also non-minimal)
        "ff000000010000000000",  # type 2^32: TYPE never takes the 9-octet form
        "0803ab",  # value overruns
        "08",  # no length
        "fd0100",  # type 256, then no length
    ],
)
def test_read_tl_rejects(wire: str) -> None:
    raw = bytes.fromhex(wire)
    with pytest.raises(DecodeError):
        read_tl(raw, 0, len(raw))


def test_iter_tlvs_and_frame_length() -> None:
    wire = encode_tlv(8, b"a") + encode_tlv(300, b"bc") + encode_tlv(7)
    assert [(t, wire[a:b]) for t, a, b in iter_tlvs(wire, 0, len(wire))] == [
        (8, b"a"),
        (300, b"bc"),
        (7, b""),
    ]
    assert frame_length(wire, 0, len(wire)) == 3
    assert frame_length(wire, 3, len(wire)) == 6
    # incomplete headers: need more bytes, not an error
    assert frame_length(b"\x05", 0, 1) is None
    assert frame_length(b"\x05\xfd\x01", 0, 3) is None
    big = b"\x06\xfd\x01\x00"
    assert frame_length(big, 0, len(big)) == 4 + 256
    with pytest.raises(DecodeError):
        frame_length(b"\x00\x01", 0, 2)
    with pytest.raises(DecodeError):
        frame_length(b"\x05\xfd\x00\x01", 0, 4)  # non-minimal length
    with pytest.raises(DecodeError):
        list(iter_tlvs(b"\x08\x05ab", 0, 4))


# --- the rules on whole packets --------------------------------------------------------------

NAME = "0703080161"  # /a
NONCE = "0a0401020304"


def interest(*elements: str) -> bytes:
    value = bytes.fromhex("".join(elements))
    return b"\x05" + encode_varnum(len(value)) + value


def data(*elements: str) -> bytes:
    value = bytes.fromhex("".join(elements))
    return b"\x06" + encode_varnum(len(value)) + value


SIG = "16031b0100" + "1720" + "00" * 32


def test_baselines_parse() -> None:
    iv = parse_interest(interest(NAME, "2100", "1200", NONCE, "0c0203e8", "220105"))
    assert (iv.can_be_prefix, iv.must_be_fresh, iv.nonce, iv.lifetime, iv.hop_limit) == (
        True,
        True,
        b"\x01\x02\x03\x04",
        1000,
        5,
    )
    dv = parse_data(data(NAME, "1403190101", "1500", SIG))
    assert dv.freshness == 1 and dv.name == bytes.fromhex("080161")


@pytest.mark.parametrize("unknown", ["8000", "80021234", "fd03e800", "fe0001000000"])
@pytest.mark.parametrize("position", [1, 2, 3, 4, 5, 6])
def test_unknown_non_critical_skipped_in_interest(unknown: str, position: int) -> None:
    elements = [NAME, "2100", "1200", NONCE, "0c0203e8", "220105"]
    elements.insert(position, unknown)
    iv = parse_interest(interest(*elements))
    assert iv.can_be_prefix and iv.must_be_fresh and iv.nonce == b"\x01\x02\x03\x04"
    assert iv.lifetime == 1000 and iv.hop_limit == 5


@pytest.mark.parametrize("unknown", ["8000", "fd03e8021234"])
@pytest.mark.parametrize("position", [1, 2, 3, 4])
def test_unknown_non_critical_skipped_in_data(unknown: str, position: int) -> None:
    elements = [NAME, "1403190101", "1500", "16031b0100", "1720" + "00" * 32]
    elements.insert(position, unknown)
    assert parse_data(data(*elements)).freshness == 1


def test_unknown_non_critical_skipped_in_meta_info() -> None:
    assert parse_data(data(NAME, "1405" + "8000" + "190101", "1500", SIG)).freshness == 1


@pytest.mark.parametrize("unknown", ["0d00", "1f00", "8100", "fd03e900", "0900"])
def test_unknown_critical_rejected(unknown: str) -> None:
    with pytest.raises(DecodeError):
        parse_interest(interest(NAME, unknown, NONCE))
    with pytest.raises(DecodeError):
        parse_data(data(NAME, unknown, "1500", SIG))
    meta = "14" + f"{len(unknown) // 2:02x}" + unknown
    with pytest.raises(DecodeError):
        parse_data(data(NAME, meta, "1500", SIG))


def test_unknown_element_before_name_rejected() -> None:
    with pytest.raises(DecodeError):
        parse_interest(interest("8000", NAME, NONCE))
    with pytest.raises(DecodeError):
        parse_data(data("8000", NAME, SIG))


@pytest.mark.parametrize(
    "elements",
    [
        [NAME, "1200", "2100", NONCE],  # MustBeFresh before CanBePrefix
        [NAME, NONCE, "1200"],
        [NAME, NONCE, "1e0507030801" + "62"],  # ForwardingHint after Nonce
        [NAME, "0c0203e8", NONCE],
        [NAME, NONCE, NONCE],  # repeated
        [NAME, "2100", "2100", NONCE],
        [NAME, "220105", NONCE],  # Nonce after HopLimit
        [NAME, NAME, NONCE],
    ],
)
def test_out_of_order_critical_rejected_in_interest(elements: list[str]) -> None:
    with pytest.raises(DecodeError):
        parse_interest(interest(*elements))


def test_out_of_order_non_critical_ignored_in_interest() -> None:
    # A second HopLimit (type 34, even) is out of order: skipped, the first one counts.
    iv = parse_interest(interest(NAME, NONCE, "220105", "220109"))
    assert iv.hop_limit == 5


@pytest.mark.parametrize(
    "elements",
    [
        [NAME, "1500", "1403190101", SIG],  # MetaInfo after Content
        [NAME, "1500", "1500", SIG],
        [NAME, "1500", "1720" + "00" * 32, "16031b0100"],  # SignatureValue first
        [NAME, "1500", "16031b0100"],  # SignatureInfo alone
        [NAME, "1500", SIG, "16031b0100"],
        [NAME, "1406" + "190101" + "180100", "1500", SIG],  # ContentType after Freshness
        [NAME, "1406" + "190101" + "190101", "1500", SIG],
    ],
)
def test_out_of_order_critical_rejected_in_data(elements: list[str]) -> None:
    with pytest.raises(DecodeError):
        parse_data(data(*elements))


def _all_prefixes(wire: bytes) -> list[bytes]:
    return [wire[:i] for i in range(len(wire))]


def test_truncated_packets_rejected() -> None:
    i = interest(NAME, "2100", "1200", NONCE, "0c0203e8", "220105", "2400")
    d = data(NAME, "1403190101", "1502abcd", SIG)
    for cut in _all_prefixes(i):
        with pytest.raises(DecodeError):
            parse_interest(cut)
    for cut in _all_prefixes(d):
        with pytest.raises(DecodeError):
            parse_data(cut)
    # a correct outer length around a truncated inner element
    with pytest.raises(DecodeError):
        parse_interest(interest(NAME, "0a0401020304"[:-2]))


def test_trailing_bytes_and_wrong_outer_type_rejected() -> None:
    with pytest.raises(DecodeError):
        parse_interest(interest(NAME, NONCE) + b"\x00")
    with pytest.raises(DecodeError):
        parse_interest(data(NAME, SIG))
    with pytest.raises(DecodeError):
        parse_data(interest(NAME, NONCE))


def test_zero_component_interest_rejected_but_data_allowed() -> None:
    with pytest.raises(DecodeError, match="at least one component"):
        parse_interest(interest("0700", NONCE))
    assert parse_data(data("0700", SIG)).name == b""


@pytest.mark.parametrize(
    "name",
    [
        "0723" + "0121" + "00" * 33,
        "0721" + "011f" + "00" * 31,
        "0702" + "0100",
        "0722" + "0220" + "00" * 32,  # right length (checked below) for comparison
    ],
)
def test_digest_component_length(name: str) -> None:
    wire = interest(name, NONCE)
    if name.startswith("0722"):
        # a correct params digest without ApplicationParameters: wrong for another reason
        with pytest.raises(DecodeError, match="ApplicationParameters"):
            parse_interest(wire)
        return
    with pytest.raises(DecodeError, match="32 octets"):
        parse_interest(wire)
    with pytest.raises(DecodeError, match="32 octets"):
        parse_data(data(name, SIG))


def test_application_parameters_need_exactly_one_params_digest() -> None:
    digest = "0220" + "00" * 32
    with pytest.raises(DecodeError):
        parse_interest(interest(NAME, NONCE, "2400"))  # no digest component
    with pytest.raises(DecodeError):
        parse_interest(interest("0725080161" + digest, NONCE))  # digest without parameters
    with pytest.raises(DecodeError):
        parse_interest(interest("0747080161" + digest + digest, NONCE, "2400"))  # two digests
    iv = parse_interest(interest("0725080161" + digest, NONCE, "2400"))
    assert iv.has_params and len(iv.name_ends) == 2


def test_after_application_parameters_only_non_critical_elements_may_follow() -> None:
    # Signature fields and unknown even types belong to the parameters block; a stray HopLimit
    # there is ignored.  Critical types are errors, as in ndn-cxx.
    digest = "0220" + "00" * 32
    head = ["0725080161" + digest, NONCE, "2400"]
    iv = parse_interest(interest(*head, "2c031b0100", "2e00", "8000", "220107"))
    assert iv.nonce == b"\x01\x02\x03\x04" and iv.has_params and iv.hop_limit is None
    for critical in ("0a0400000000", "0d00", "2100", "0c0101", "fd03e900"):
        with pytest.raises(DecodeError):
            parse_interest(interest(*head, "2c031b0100", critical))


@pytest.mark.parametrize(
    "bad",
    [
        "2101ff",  # CanBePrefix with a value
        "1201ff",
        "0a03010203",  # Nonce of 3 octets
        "0a050102030405",
        "0c03000001",  # 3-octet lifetime
        "22020001",  # 2-octet HopLimit
        "2200",
        "1e0208ff",  # ForwardingHint with a truncated element
        "1e0408020000",  # ForwardingHint holding a non-Name
        "1e0507030100aa",  # ForwardingHint Name with a bad digest component
        "1e03" + "1f0100",  # Delegation without a Name
        "1e07" + "1f05" + "07030100aa",  # Delegation with a bad Name
        "1e02" + "8100",  # unknown critical element
    ],
)
def test_bad_interest_element_values_rejected(bad: str) -> None:
    with pytest.raises(DecodeError):
        parse_interest(interest(NAME, bad))


@pytest.mark.parametrize(
    "hint",
    [
        "1f08" + "1e0100" + "0703080162",  # legacy Delegation: Preference, Name
        "0703080162" + "8000",  # unknown non-critical element skipped
        "",  # empty: ndn-cxx accepts it too
    ],
)
def test_forwarding_hint_forms_accepted(hint: str) -> None:
    fh = "1e" + f"{len(hint) // 2:02x}" + hint
    iv = parse_interest(interest(NAME, fh, NONCE))
    assert iv.forwarding_hint == bytes.fromhex(hint) and iv.nonce == b"\x01\x02\x03\x04"


@pytest.mark.parametrize(
    "meta",
    [
        "1405" + "1803000001",  # 3-octet ContentType
        "1405" + "1903000001",  # 3-octet FreshnessPeriod
        "1402" + "1a00",  # FinalBlockId without a component
        "1408" + "1a06" + "08010a08010b",  # FinalBlockId with two components
        "1406" + "1a04" + "08010a08",  # FinalBlockId with a truncated second component
        "1424" + "1a22" + "0120" + "00" * 31 + "0000",  # FinalBlockId: digest of 31+2 octets
    ],
)
def test_bad_meta_info_rejected(meta: str) -> None:
    with pytest.raises(DecodeError):
        parse_data(data(NAME, meta, "1500", SIG))
