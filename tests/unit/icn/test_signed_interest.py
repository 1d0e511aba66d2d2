"""Signed Interests built by icn.security.signed_interest, read back by python-ndn (the reference
codec)
and by our own lean reader: same name, parameters and signature fields, a digest signature that
verifies, a ParametersSha256Digest component that matches, SignatureTimes that only increase.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ndn.encoding import parse_interest

from icn.errors import EncodeError
from icn.security.signed_interest import make_signed_interest, next_signature_time
from icn.wire import tlv_types as T
from icn.wire.name import from_uri
from icn.wire.packet import parse_interest as icn_parse_interest
from tests.unit.icn.test_name import (
    SETTINGS,
    nonempty_component_lists,
    params_digest_components,
)


class HmacSigner:
    """A keyed signer, to check that the signed portion is what a verifier recomputes."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def signature_info(self) -> bytes:
        return bytes((T.SIGNATURE_TYPE, 1, T.SIG_HMAC_WITH_SHA256))

    def sign(self, signed_portion: bytes) -> bytes:
        return hmac.digest(self.key, signed_portion, "sha256")


def _joined(parts: Any) -> bytes:
    return b"".join(bytes(p) for p in parts)


def _check_digests(wire: bytes) -> Any:
    name, params, app_params, sig = parse_interest(wire)
    # ParametersSha256Digest component = sha256(ApplicationParameters .. end of Interest)
    assert hashlib.sha256(_joined(sig.digest_covered_part)).digest() == bytes(sig.digest_value_buf)
    assert bytes(name[-1])[:2] == b"\x02\x20"
    return name, params, app_params, sig


@SETTINGS
@given(
    comps=nonempty_component_lists,
    app_params=st.binary(max_size=80),
    # python-ndn reads SignatureNonce as an NNI, so only 1, 2, 4 or 8 octets parse there
    sig_nonce=st.sampled_from([1, 2, 4, 8]).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    sig_time=st.integers(0, 2**63),
    lifetime=st.one_of(st.none(), st.integers(0, 2**32)),
    cbp=st.booleans(),
    mbf=st.booleans(),
    hop_limit=st.one_of(st.none(), st.integers(0, 255)),
)
def test_python_ndn_reads_the_same_fields(
    comps: list[bytes],
    app_params: bytes,
    sig_nonce: bytes,
    sig_time: int,
    lifetime: int | None,
    cbp: bool,
    mbf: bool,
    hop_limit: int | None,
) -> None:
    # a params-digest component given by the caller is dropped, never duplicated or signed
    stripped = b"".join(c for c in comps if c[0] != T.COMP_PARAMS_DIGEST)
    if not stripped:
        return
    wire = make_signed_interest(
        b"".join(comps),
        app_params=app_params,
        sig_nonce=sig_nonce,
        sig_time_ms=sig_time,
        lifetime=lifetime,
        can_be_prefix=cbp,
        must_be_fresh=mbf,
        hop_limit=hop_limit,
    )
    name, params, got_params, sig = _check_digests(wire)
    assert _joined(name[:-1]) == stripped
    assert bytes(got_params) == app_params
    assert params.can_be_prefix == cbp
    assert params.must_be_fresh == mbf
    assert params.lifetime == lifetime
    assert params.hop_limit == hop_limit
    info = sig.signature_info
    assert info.signature_type == T.SIG_DIGEST_SHA256
    assert info.signature_nonce == int.from_bytes(sig_nonce, "big")
    assert info.signature_time == sig_time
    assert info.key_locator is None
    # DigestSha256 verifies: sha256 over name components (no digest comp) + params + ISigInfo
    covered = _joined(sig.signature_covered_part)
    assert covered.startswith(stripped)
    assert hashlib.sha256(covered).digest() == bytes(sig.signature_value_buf)

    view = icn_parse_interest(wire)
    assert view.has_params and view.name == _joined(name)
    assert view.last_component_type == T.COMP_PARAMS_DIGEST


@SETTINGS
@given(comps=nonempty_component_lists, key=st.binary(min_size=1, max_size=32), kl=st.booleans())
def test_keyed_signer_and_key_locator(comps: list[bytes], key: bytes, kl: bool) -> None:
    stripped = b"".join(c for c in comps if c[0] != T.COMP_PARAMS_DIGEST)
    if not stripped:
        return
    key_name = from_uri("/key/KEY/1")
    wire = make_signed_interest(
        stripped, app_params=b"x", signer=HmacSigner(key), key_locator=key_name if kl else None
    )
    _, _, _, sig = _check_digests(wire)
    info = sig.signature_info
    assert info.signature_type == T.SIG_HMAC_WITH_SHA256
    if kl:
        assert _joined(info.key_locator.name) == key_name
    else:
        assert info.key_locator is None
    expected = hmac.digest(key, _joined(sig.signature_covered_part), "sha256")
    assert bytes(sig.signature_value_buf) == expected


@SETTINGS
@given(comps=nonempty_component_lists, digest=params_digest_components)
def test_an_old_digest_component_is_replaced(comps: list[bytes], digest: bytes) -> None:
    name = b"".join(comps)
    stripped = b"".join(c for c in comps if c[0] != T.COMP_PARAMS_DIGEST)
    if not stripped:
        return
    wire = make_signed_interest(name + digest, sig_nonce=b"n" * 8, sig_time_ms=1)
    again = make_signed_interest(stripped, sig_nonce=b"n" * 8, sig_time_ms=1, nonce=b"abcd")
    got = parse_interest(wire)[0]
    assert _joined(got) == _joined(parse_interest(again)[0])


def test_defaults_empty_parameters_random_nonce_increasing_time() -> None:
    name = from_uri("/localhost/nfd/rib/register")
    wires = [make_signed_interest(name) for _ in range(50)]
    infos = [parse_interest(w)[3].signature_info for w in wires]
    times = [i.signature_time for i in infos]
    assert all(b > a for a, b in itertools.pairwise(times))
    assert len({i.signature_nonce for i in infos}) == 50
    _, params, app_params, _ = parse_interest(wires[0])
    assert bytes(app_params) == b""
    assert params.lifetime is None and not params.can_be_prefix
    assert wires[0].count(b"\x24\x00") >= 1  # empty ApplicationParameters on the wire


def test_explicit_times_leave_the_automatic_sequence_alone() -> None:
    # a far-future explicit time must not push later commands outside NFD's +-2 min window
    wire = make_signed_interest(from_uri("/a"), sig_time_ms=2**63)
    assert parse_interest(wire)[3].signature_info.signature_time == 2**63
    before = next_signature_time()
    assert abs(before - time.time() * 1000) < 60_000
    assert next_signature_time() > before


def test_sequenced_interests_keep_the_clock_time_at_any_rate() -> None:
    # A session's calls carry SignatureSeqNum and the server bounds their time's skew (60 s):
    # the strictly increasing command time, one millisecond more per Interest, ran 9 s ahead
    # of the clock per second at 10,000 calls a second, and the server refused them as stale
    name = from_uri("/svc/fn")
    started = time.time() * 1000
    wires = [make_signed_interest(name, sig_seq=i) for i in range(20_000)]
    ended = time.time() * 1000
    times = [parse_interest(w)[3].signature_info.signature_time for w in wires[::1000]]
    assert all(started - 1 <= t <= ended + 1 for t in times), (started, times, ended)
    # commands without a sequence number still get strictly increasing times
    a, b = (next_signature_time() for _ in range(2))
    assert b > a


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sig_nonce": b""}, "SignatureNonce"),
        ({"nonce": b"abc"}, "Nonce"),
        ({"hop_limit": 256}, "HopLimit"),
    ],
)
def test_bad_fields_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(EncodeError, match=match):
        make_signed_interest(from_uri("/a"), **kwargs)


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(EncodeError, match="component"):
        make_signed_interest(b"")
    with pytest.raises(EncodeError, match="malformed"):
        make_signed_interest(b"\x08\x05ab")


def test_signer_key_locator_conflict() -> None:
    class WithKl(HmacSigner):
        def signature_info(self) -> bytes:
            return super().signature_info() + b"\x1c\x03\x07\x01\x00"

    with pytest.raises(EncodeError, match="KeyLocator"):
        make_signed_interest(from_uri("/a"), signer=WithKl(b"k"), key_locator=from_uri("/k"))
