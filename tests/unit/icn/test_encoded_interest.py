"""The offsets the Interest encoders return (what the endpoint keeps of an Interest it sends
instead of parsing it back) against what the lean reader finds in the same bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icn.errors import EncodeError
from icn.security.signed_interest import encode_signed_interest, make_signed_interest
from icn.wire.encode import EncodedInterest, encode_interest, make_interest
from icn.wire.name import from_uri, reflexive_component
from icn.wire.packet import parse_interest
from tests.unit.icn.test_name import SETTINGS, nonempty_component_lists, params_digest_components

NAME = from_uri("/a/b/seg=3")
NONCE = b"\x01\x02\x03\x04"


def same_as_parsed(enc: EncodedInterest) -> None:
    iv = parse_interest(enc.wire)
    assert enc.name == iv.name
    assert enc.name_ends == iv.name_ends
    assert enc.nonce_pos == iv.nonce_pos
    assert enc.wire[enc.nonce_pos : enc.nonce_pos + 4] == iv.nonce


PLAIN_CASES: dict[str, dict[str, Any]] = {
    "plain": {},
    "prefix and fresh": {"can_be_prefix": True, "must_be_fresh": True, "lifetime": 100},
    "forwarding hint": {"forwarding_hint": [from_uri("/hint/one"), from_uri("/h2")]},
    "app params": {"app_params": b"xyz", "hop_limit": 3},
    # a 3-octet TLV-LENGTH moves every offset behind the outer header
    "large params": {"app_params": bytes(300), "can_be_prefix": True},
    "all": {
        "can_be_prefix": True,
        "must_be_fresh": True,
        "forwarding_hint": [from_uri("/hint")],
        "lifetime": 2**33,
        "hop_limit": 0,
        "app_params": b"",
    },
}


@pytest.mark.parametrize("kwargs", PLAIN_CASES.values(), ids=list(PLAIN_CASES))
def test_plain_offsets_are_what_the_reader_finds(kwargs: dict[str, Any]) -> None:
    enc = encode_interest(NAME, nonce=NONCE, **kwargs)
    same_as_parsed(enc)
    assert enc.wire == make_interest(NAME, nonce=NONCE, **kwargs)
    assert enc.nonce_pos > 0 and enc.wire[enc.nonce_pos : enc.nonce_pos + 4] == NONCE


@pytest.mark.parametrize("kwargs", PLAIN_CASES.values(), ids=list(PLAIN_CASES))
def test_signed_offsets_are_what_the_reader_finds(kwargs: dict[str, Any]) -> None:
    fixed: dict[str, Any] = {"nonce": NONCE, "sig_nonce": b"n" * 8, "sig_time_ms": 1}
    kwargs = {"app_params": b"", **kwargs}
    enc = encode_signed_interest(NAME, **fixed, **kwargs)
    same_as_parsed(enc)
    assert enc.wire == make_signed_interest(NAME, **fixed, **kwargs)
    assert enc.name.startswith(NAME) and len(enc.name_ends) == 4  # the params digest appended


@SETTINGS
@given(nonempty_component_lists, params_digest_components, st.data())
def test_offsets_for_any_name_and_a_stale_params_digest(
    comps: list[bytes], digest: bytes, data: st.DataObject
) -> None:
    # a name taken from a received Interest: its digest is replaced (plain) or dropped (signed)
    at = data.draw(st.integers(0, len(comps)))
    stale = b"".join([*comps[:at], digest, *comps[at:]])
    same_as_parsed(encode_interest(stale, app_params=b"p"))
    same_as_parsed(encode_signed_interest(stale, app_params=b"p"))
    same_as_parsed(encode_interest(b"".join(comps), can_be_prefix=True))


def test_reflexive_trigger_name_keeps_its_last_component() -> None:
    name = NAME + reflexive_component(bytes(16))
    enc = encode_interest(name)
    same_as_parsed(enc)
    assert enc.name[enc.name_ends[-2] :] == reflexive_component(bytes(16))


def test_malformed_name_is_refused() -> None:
    with pytest.raises(EncodeError):
        encode_interest(b"\x08\x05ab")
    with pytest.raises(EncodeError):
        encode_signed_interest(b"\x08\x05ab")
