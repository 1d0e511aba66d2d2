"""NDNLPv2: every field round-trips, the order and ignore rules hold, and python-ndn agrees."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ndn.encoding import make_network_nack, parse_lp_packet_v2, parse_network_nack
from ndn.encoding.ndnlp_v2 import CachePolicy, LpPacket, LpPacketValue, NetworkNack

from icn.errors import DecodeError, EncodeError
from icn.wire import tlv_types as T
from icn.wire.lp import LpView, encode_lp, encode_nack, lp_head, parse_lp
from icn.wire.tlv import encode_nni_tlv, encode_tlv
from tests.unit.icn.test_name import SETTINGS, nni_values

INTEREST = bytes.fromhex("051b070b08036e646e080474657374210012000a04010203040c0203e8")
FRAGMENT = encode_tlv(T.LP_FRAGMENT, INTEREST)
_FIELDS = (
    "sequence",
    "frag_index",
    "frag_count",
    "pit_token",
    "nack_reason",
    "incoming_face_id",
    "next_hop_face_id",
    "cache_policy",
    "congestion_mark",
)
nack_reasons = st.one_of(
    st.none(),
    st.sampled_from([T.NACK_NONE, T.NACK_CONGESTION, T.NACK_DUPLICATE, T.NACK_NO_ROUTE]),
)


def lp(*fields: bytes) -> bytes:
    return encode_tlv(T.LP_PACKET, b"".join(fields))


@st.composite
def lp_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "pit_token": draw(st.one_of(st.none(), st.binary(min_size=1, max_size=32))),
        "nack_reason": draw(nack_reasons),
        "incoming_face_id": draw(st.one_of(st.none(), nni_values)),
        "next_hop_face_id": draw(st.one_of(st.none(), nni_values)),
        "cache_policy": draw(st.one_of(st.none(), nni_values)),
        "congestion_mark": draw(st.one_of(st.just(0), nni_values)),
    }
    if draw(st.booleans()):
        count = draw(st.integers(1, 1000))
        fields["frag_count"] = count
        fields["frag_index"] = draw(st.integers(0, count - 1))
        fields["sequence"] = draw(st.integers(0, 2**64 - 1))
    elif draw(st.booleans()):
        fields["sequence"] = draw(st.integers(0, 2**64 - 1))
    return fields


def assert_fields(view: LpView, fields: dict[str, Any]) -> None:
    defaults = LpView()
    for key in _FIELDS:
        assert getattr(view, key) == fields.get(key, getattr(defaults, key)), key


@SETTINGS
@given(lp_fields(), st.one_of(st.none(), st.binary(min_size=1, max_size=300)))
def test_every_field_round_trips(fields: dict[str, Any], fragment: bytes | None) -> None:
    view = parse_lp(encode_lp(fragment, **fields))
    assert view.fragment == fragment
    assert_fields(view, fields)


@SETTINGS
@given(lp_fields(), st.binary(min_size=1, max_size=300))
def test_python_ndn_reads_icn_lp_packets(fields: dict[str, Any], fragment: bytes) -> None:
    fields.pop("sequence", None)  # python-ndn has no Sequence field, nor fragmentation
    fields.pop("frag_index", None)
    fields.pop("frag_count", None)
    ndn = parse_lp_packet_v2(encode_lp(fragment, **fields))
    assert bytes(ndn.fragment) == fragment
    assert _opt_bytes(ndn.pit_token) == fields["pit_token"]
    if fields["nack_reason"] is None:
        assert ndn.nack is None
    else:
        assert (ndn.nack.nack_reason or 0) == fields["nack_reason"]
    assert ndn.incoming_face_id == fields["incoming_face_id"]
    assert ndn.next_hop_face_id == fields["next_hop_face_id"]
    policy = None if ndn.cache_policy is None else ndn.cache_policy.cache_policy_type
    assert policy == fields["cache_policy"]
    assert (ndn.congestion_mark or 0) == fields["congestion_mark"]


@SETTINGS
@given(lp_fields(), st.binary(min_size=1, max_size=300))
def test_icn_reads_python_ndn_lp_packets(fields: dict[str, Any], fragment: bytes) -> None:
    value = LpPacketValue()
    value.pit_token = fields["pit_token"]
    if fields["nack_reason"] is not None:
        value.nack = NetworkNack()
        value.nack.nack_reason = fields["nack_reason"]
    value.incoming_face_id = fields["incoming_face_id"]
    value.next_hop_face_id = fields["next_hop_face_id"]
    if fields["cache_policy"] is not None:
        value.cache_policy = CachePolicy()
        value.cache_policy.cache_policy_type = fields["cache_policy"]
    value.congestion_mark = fields["congestion_mark"] or None
    value.fragment = fragment
    packet = LpPacket()
    packet.lp_packet = value
    view = parse_lp(bytes(packet.encode()))
    assert view.fragment == fragment
    for key in ("sequence", "frag_index", "frag_count"):
        fields.pop(key, None)
    assert_fields(view, fields)


def _opt_bytes(buf: Any) -> bytes | None:
    return None if buf is None else bytes(buf)


@pytest.mark.parametrize("reason", [T.NACK_CONGESTION, T.NACK_DUPLICATE, T.NACK_NO_ROUTE])
def test_nack_bytes_equal_python_ndn(reason: int) -> None:
    assert encode_nack(INTEREST, reason) == bytes(make_network_nack(INTEREST, reason))
    assert parse_network_nack(encode_nack(INTEREST, reason, b"\x01")) == (reason, INTEREST)


def test_nack_without_reason_reads_as_none() -> None:
    view = parse_lp(lp(encode_tlv(T.LP_NACK), FRAGMENT))
    assert view.nack_reason == T.NACK_NONE
    assert encode_nack(INTEREST, T.NACK_NONE) == lp(encode_tlv(T.LP_NACK), FRAGMENT)
    # python-ndn writes an explicit zero reason; same meaning
    assert parse_lp(bytes(make_network_nack(INTEREST, 0))).nack_reason == T.NACK_NONE


@pytest.mark.parametrize("reason", [1, 49, 51, 200, 65536])
def test_unknown_nack_reason_reads_as_none(reason: int) -> None:
    nack = encode_tlv(T.LP_NACK, encode_nni_tlv(T.LP_NACK_REASON, reason))
    assert parse_lp(lp(nack, FRAGMENT)).nack_reason == T.NACK_NONE


def test_not_a_nack() -> None:
    assert parse_lp(lp(FRAGMENT)).nack_reason is None


SEQ = encode_tlv(T.LP_SEQUENCE, bytes(8))
TOKEN = encode_tlv(T.LP_PIT_TOKEN, b"\x01")
MARK = encode_nni_tlv(T.LP_CONGESTION_MARK, 1)
ACK = encode_tlv(T.LP_ACK, bytes(8))


@pytest.mark.parametrize(
    "fields",
    [
        [TOKEN, SEQ, FRAGMENT],
        [MARK, TOKEN, FRAGMENT],
        [TOKEN, TOKEN, FRAGMENT],
        [SEQ, SEQ, FRAGMENT],
        [FRAGMENT, TOKEN],
        [FRAGMENT, FRAGMENT],
        [encode_tlv(T.LP_NACK), TOKEN, FRAGMENT],
    ],
)
def test_field_order_rule(fields: list[bytes]) -> None:
    with pytest.raises(DecodeError):
        parse_lp(lp(*fields))


def test_ascending_fields_and_repeated_ack_accepted() -> None:
    view = parse_lp(lp(SEQ, TOKEN, MARK, ACK, ACK, FRAGMENT))
    assert (view.sequence, view.pit_token, view.congestion_mark) == (0, b"\x01", 1)
    assert parse_lp(lp(SEQ, TOKEN)).fragment is None  # no Fragment: legal (idle, Ack-only)


_KNOWN = {81, 82, 83, 98, 800, 812, 816, 820, 832, 836, 840, 844, 848}


@given(st.integers(81, 1100).filter(lambda t: t not in _KNOWN))
def test_unknown_field_rule(typ: int) -> None:
    wire = lp(TOKEN, encode_tlv(typ, b"\x00\x01"), FRAGMENT)
    if 800 <= typ <= 959 and typ & 3 == 0:
        view = parse_lp(wire)
        assert view.pit_token == b"\x01" and view.fragment == INTEREST
    else:
        with pytest.raises(DecodeError):
            parse_lp(wire)


@pytest.mark.parametrize("typ", [1, 5, 6, 7, 8, 50, 63])
def test_low_unknown_field_types_drop(typ: int) -> None:
    with pytest.raises(DecodeError):
        parse_lp(lp(encode_tlv(typ, b"x"), FRAGMENT))


@pytest.mark.parametrize("size", [1, 32])
def test_pit_token_length_bounds_accepted(size: int) -> None:
    token = bytes(range(size))
    assert parse_lp(lp(encode_tlv(T.LP_PIT_TOKEN, token), FRAGMENT)).pit_token == token


@pytest.mark.parametrize("size", [0, 33])
def test_pit_token_length_bounds_rejected(size: int) -> None:
    with pytest.raises(DecodeError):
        parse_lp(lp(encode_tlv(T.LP_PIT_TOKEN, bytes(size)), FRAGMENT))
    with pytest.raises(EncodeError):
        encode_lp(INTEREST, pit_token=bytes(size))


@pytest.mark.parametrize(("index", "count"), [(1, 1), (5, 5), (6, 5), (0, 0), (2**32, 2)])
def test_frag_index_must_be_below_frag_count(index: int, count: int) -> None:
    wire = lp(SEQ, encode_nni_tlv(T.LP_FRAG_INDEX, index), encode_nni_tlv(T.LP_FRAG_COUNT, count))
    with pytest.raises(DecodeError, match="FragIndex"):
        parse_lp(wire)


def test_fragmented_packet_needs_sequence() -> None:
    wire = lp(encode_nni_tlv(T.LP_FRAG_INDEX, 0), encode_nni_tlv(T.LP_FRAG_COUNT, 2), FRAGMENT)
    with pytest.raises(DecodeError, match="Sequence"):
        parse_lp(wire)


@pytest.mark.parametrize(
    "wire",
    [
        lp(encode_tlv(T.LP_SEQUENCE, bytes(7)), FRAGMENT),  # Sequence is fixed 8 octets
        lp(encode_tlv(T.LP_SEQUENCE, bytes(9)), FRAGMENT),
        lp(encode_tlv(T.LP_ACK, bytes(4)), FRAGMENT),
        lp(encode_tlv(T.LP_TX_SEQUENCE, bytes(2)), FRAGMENT),
        lp(encode_tlv(T.LP_FRAG_INDEX, bytes(3)), FRAGMENT),  # 3-octet NNI
        lp(encode_tlv(T.LP_CONGESTION_MARK, bytes(5)), FRAGMENT),
        lp(encode_tlv(T.LP_CACHE_POLICY), FRAGMENT),  # no CachePolicyType
        lp(encode_tlv(T.LP_FRAGMENT)),  # empty Fragment
        lp(FRAGMENT) + b"\x00",  # trailing byte
        INTEREST,  # not an LpPacket
        b"",
        lp(encode_tlv(T.LP_NACK, b"\xfd\x03\x21\x03\x00\x00\x01"), FRAGMENT),  # 3-octet reason
    ],
)
def test_malformed_lp_packets_rejected(wire: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_lp(wire)


def test_encode_lp_field_order_is_ascending() -> None:
    wire = encode_lp(
        INTEREST,
        sequence=1,
        frag_index=0,
        frag_count=1,
        pit_token=b"t",
        nack_reason=T.NACK_DUPLICATE,
        incoming_face_id=3,
        next_hop_face_id=4,
        cache_policy=T.CACHE_POLICY_NO_CACHE,
        congestion_mark=1,
    )
    view = parse_lp(wire)
    assert (view.sequence, view.pit_token, view.nack_reason) == (1, b"t", T.NACK_DUPLICATE)
    assert (view.incoming_face_id, view.next_hop_face_id) == (3, 4)
    assert (view.cache_policy, view.congestion_mark) == (T.CACHE_POLICY_NO_CACHE, 1)
    assert "fragment=29 B" in repr(view)
    # a bare LpPacket (no field at all) still parses
    assert encode_lp(None) == b"\x64\x00"
    assert parse_lp(encode_lp(None)).fragment is None


@SETTINGS
@given(
    st.binary(min_size=1, max_size=70_000),
    st.one_of(st.none(), st.binary(min_size=1, max_size=32)),
    st.sampled_from([None, T.CACHE_POLICY_NO_CACHE]),
)
def test_a_header_before_its_fragment_is_the_whole_lp_packet(
    fragment: bytes, token: bytes | None, policy: int | None
) -> None:
    # an endpoint writes a large Data behind this header instead of copying it into a packet
    head = lp_head(len(fragment), pit_token=token, cache_policy=policy)
    assert head + fragment == encode_lp(fragment, pit_token=token, cache_policy=policy)
    lp = parse_lp(head + fragment)
    assert lp.pit_token == token and lp.cache_policy == policy
