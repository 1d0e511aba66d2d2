"""Two codecs, one truth: the lean codec (icn.wire.packet, icn.wire.encode) and python-ndn agree
both ways.

python-ndn encodes random Interests and Data, icn reads them; icn encodes, python-ndn reads.
Every field the lean views expose is compared, as are the signatures and digests python-ndn
can check, and the in-place rewrites a forwarder does (Nonce, HopLimit) are read back by
python-ndn.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from ndn.encoding import (
    Component,
    InterestParam,
    MetaInfo,
    Name,
    SignatureType,
    get_tl_num_size,
    make_data,
    make_interest,
    parse_data,
    parse_interest,
)
from ndn.security import DigestSha256Signer, HmacSha256Signer

from icn.wire import encode
from icn.wire import tlv_types as T
from icn.wire.packet import InterestView
from icn.wire.packet import parse_data as icn_parse_data
from icn.wire.packet import parse_interest as icn_parse_interest
from icn.wire.signer import DIGEST_SHA256
from tests.unit.icn.test_name import (
    SETTINGS,
    comp,
    component_lists,
    components,
    nni_values,
    nonempty_component_lists,
    params_digest_components,
)

lifetimes = st.one_of(st.none(), st.just(T.DEFAULT_INTEREST_LIFETIME_MS), nni_values)
hop_limits = st.one_of(st.none(), st.sampled_from([0, 1, 255]), st.integers(0, 255))
forwarding_hints = st.lists(nonempty_component_lists, max_size=3)
app_params = st.one_of(st.none(), st.binary(max_size=60))


def joined(name: Any) -> bytes:
    """A python-ndn FormalName (list of component buffers) as a name value."""
    return b"".join(bytes(c) for c in name)


def ends_of(name: Any) -> list[int]:
    out, total = [], 0
    for c in name:
        total += len(c)
        out.append(total)
    return out


HMAC_KEY = b"k" * 32


def interest_signers() -> st.SearchStrategy[Any]:
    return st.sampled_from(
        [None, DigestSha256Signer(for_interest=True), HmacSha256Signer("/key/hmac", HMAC_KEY)]
    )


@dataclass
class NdnInterest:
    """What python-ndn is asked to encode, and (after ``encode``) what it produced."""

    comps: list[bytes]
    param: InterestParam
    app_params: bytes | None
    signer: Any
    wire: bytes = b""
    final_name: list[bytes] | None = None

    @property
    def has_params(self) -> bool:
        return self.app_params is not None or self.signer is not None

    def encode(self) -> NdnInterest:
        """Encode here, not in the strategy: python-ndn's signers draw from ``random``."""
        wire = make_interest(self.comps, self.param, self.app_params, self.signer)
        self.wire = bytes(wire)
        # make_interest(need_final_name=True) reports a stale digest when it fills an existing
        # params digest component in place, so take the name from the packet itself.
        self.final_name = [bytes(c) for c in parse_interest(self.wire)[0]]
        return self


@st.composite
def ndn_interests(draw: st.DrawFn) -> NdnInterest:
    comps = draw(nonempty_component_lists)
    params = draw(app_params)
    signer = draw(interest_signers())
    has_params = params is not None or signer is not None
    if has_params and draw(st.booleans()):
        # python-ndn fills an existing params digest component in place instead of appending
        comps.insert(draw(st.integers(0, len(comps))), draw(params_digest_components))
    param = InterestParam(
        can_be_prefix=draw(st.booleans()),
        must_be_fresh=draw(st.booleans()),
        nonce=draw(st.one_of(st.none(), st.integers(0, 2**32 - 1))),
        lifetime=draw(lifetimes),
        hop_limit=draw(hop_limits),
        forwarding_hint=draw(forwarding_hints),
    )
    return NdnInterest(comps, param, params, signer)


def assert_view_matches(iv: InterestView, ndn: NdnInterest) -> None:
    param = ndn.param
    assert ndn.final_name is not None
    assert iv.name == joined(ndn.final_name)
    assert iv.name_ends == ends_of(ndn.final_name)
    assert iv.last_component_type == Component.get_type(ndn.final_name[-1])
    assert iv.can_be_prefix == param.can_be_prefix
    assert iv.must_be_fresh == param.must_be_fresh
    assert iv.nonce == (None if param.nonce is None else param.nonce.to_bytes(4, "big"))
    expected_lifetime = T.DEFAULT_INTEREST_LIFETIME_MS if param.lifetime is None else param.lifetime
    assert iv.lifetime == expected_lifetime
    assert iv.hop_limit == param.hop_limit
    hint = b"".join(Name.to_bytes(n) for n in param.forwarding_hint)
    assert iv.forwarding_hint == (hint or None)
    assert iv.has_params == ndn.has_params


@SETTINGS
@given(ndn_interests())
def test_python_ndn_interest_read_by_icn(ndn: NdnInterest) -> None:
    ndn.encode()
    assert_view_matches(icn_parse_interest(ndn.wire), ndn)
    assert_interest_integrity(parse_interest(ndn.wire))


@SETTINGS
@given(ndn_interests(), st.binary(min_size=4, max_size=4))
def test_with_nonce_is_read_back_by_python_ndn(ndn: NdnInterest, nonce: bytes) -> None:
    ndn.encode()
    # Set or insert the Nonce the way a forwarder does; python-ndn must see only that change.
    before = parse_interest(ndn.wire)
    rewired = icn_parse_interest(ndn.wire).with_nonce(nonce)
    after = parse_interest(rewired)
    assert after[1].nonce == int.from_bytes(nonce, "big")
    changed = replace(ndn, param=replace(ndn.param, nonce=after[1].nonce))
    assert_view_matches(icn_parse_interest(rewired), changed)
    assert joined(after[0]) == joined(before[0])
    assert after[2] == before[2]  # ApplicationParameters
    assert after[3].signature_info == before[3].signature_info
    # the Nonce is covered by neither the signature nor the params digest
    assert_interest_integrity(after)


def assert_interest_integrity(parsed: Any) -> None:
    """The params digest and the signature (DigestSha256 or the test HMAC key) still hold."""
    sig = parsed[3]
    if sig.digest_value_buf is not None:
        covered = b"".join(bytes(b) for b in sig.digest_covered_part)
        assert hashlib.sha256(covered).digest() == bytes(sig.digest_value_buf)
    if sig.signature_info is None:
        return
    signed = b"".join(bytes(b) for b in sig.signature_covered_part)
    if sig.signature_info.signature_type == SignatureType.DIGEST_SHA256:
        expected = hashlib.sha256(signed).digest()
    else:
        expected = hmac.new(HMAC_KEY, signed, hashlib.sha256).digest()
    assert bytes(sig.signature_value_buf) == expected


@SETTINGS
@given(ndn_interests(), st.integers(0, 255))
def test_with_hop_limit_is_read_back_by_python_ndn(ndn: NdnInterest, hop: int) -> None:
    ndn.encode()
    iv = icn_parse_interest(ndn.wire)
    if iv.hop_limit is None:
        return
    after = parse_interest(iv.with_hop_limit(hop))
    assert after[1].hop_limit == hop
    assert joined(after[0]) == iv.name and after[1].nonce == ndn.param.nonce


def _bytes_or_none(buf: Any) -> bytes | None:
    return None if buf is None else bytes(buf)


@st.composite
def icn_interest_args(draw: st.DrawFn) -> dict[str, Any]:
    comps = draw(nonempty_component_lists)
    params = draw(app_params)
    if params is not None and draw(st.booleans()):
        comps.insert(draw(st.integers(0, len(comps))), draw(params_digest_components))
    return {
        "name": b"".join(comps),
        "nonce": draw(st.one_of(st.none(), st.binary(min_size=4, max_size=4))),
        "lifetime": draw(lifetimes),
        "can_be_prefix": draw(st.booleans()),
        "must_be_fresh": draw(st.booleans()),
        "hop_limit": draw(hop_limits),
        "forwarding_hint": [b"".join(n) for n in draw(forwarding_hints)] or None,
        "app_params": params,
    }


def _expected_interest_name(args: dict[str, Any], wire: bytes) -> bytes:
    """The name icn should have sent: the params digest set where it was, else appended."""
    name: bytes = args["name"]
    if args["app_params"] is None:
        return name
    size = len(args["app_params"])
    params_tlv = wire[-(1 + get_tl_num_size(size) + size) :]  # ApplicationParameters is last
    assert params_tlv[0] == T.APPLICATION_PARAMETERS
    digest = comp(T.COMP_PARAMS_DIGEST, hashlib.sha256(params_tlv).digest())
    comps = [bytes(c) for c in Name.decode(Name.encode([name]))[0]]
    for i, c in enumerate(comps):
        if Component.get_type(c) == T.COMP_PARAMS_DIGEST:
            comps[i] = digest
            return b"".join(comps)
    return name + digest


@SETTINGS
@given(icn_interest_args())
def test_icn_interest_read_by_python_ndn(args: dict[str, Any]) -> None:
    wire = encode.make_interest(**args)
    name, param, params, sig = parse_interest(wire)
    assert joined(name) == _expected_interest_name(args, wire)
    assert param.can_be_prefix == args["can_be_prefix"]
    assert param.must_be_fresh == args["must_be_fresh"]
    if args["nonce"] is not None:
        assert param.nonce == int.from_bytes(args["nonce"], "big")
    else:
        assert param.nonce is not None  # the encoder always sends one
    lifetime = args["lifetime"]
    assert param.lifetime == (None if lifetime in (None, 4000) else lifetime)
    assert param.hop_limit == args["hop_limit"]
    assert [joined(n) for n in param.forwarding_hint] == (args["forwarding_hint"] or [])
    assert _bytes_or_none(params) == args["app_params"]
    assert sig.signature_info is None
    if args["app_params"] is not None:
        # the digest python-ndn finds in the name covers what python-ndn says it should
        covered = b"".join(bytes(b) for b in sig.digest_covered_part)
        assert hashlib.sha256(covered).digest() == bytes(sig.digest_value_buf)
        assert [Component.get_type(c) for c in name].count(T.COMP_PARAMS_DIGEST) == 1
    # and icn reads its own output back the same way
    iv = icn_parse_interest(wire)
    assert iv.name == joined(name) and iv.name_ends == ends_of(name)
    assert iv.nonce == param.nonce.to_bytes(4, "big")
    assert iv.lifetime == (lifetime if lifetime is not None else 4000)
    assert (iv.can_be_prefix, iv.must_be_fresh, iv.hop_limit) == (
        param.can_be_prefix,
        param.must_be_fresh,
        param.hop_limit,
    )
    assert iv.has_params == (args["app_params"] is not None)


content_types = st.one_of(st.none(), st.sampled_from([0, 1, 2, 3, 4, 5, 1024]), nni_values)
freshness = st.one_of(st.none(), nni_values)
final_block_ids = st.one_of(st.none(), components)
contents = st.one_of(st.none(), st.binary(max_size=200))


def data_signers() -> st.SearchStrategy[Any]:
    return st.sampled_from([None, DigestSha256Signer(), HmacSha256Signer("/key/hmac", HMAC_KEY)])


@SETTINGS
@given(component_lists, content_types, freshness, final_block_ids, contents, data_signers())
def test_python_ndn_data_read_by_icn(
    comps: list[bytes],
    content_type: int | None,
    fresh: int | None,
    fbi: bytes | None,
    content: bytes | None,
    signer: Any,
) -> None:
    meta = MetaInfo(content_type=content_type, freshness_period=fresh, final_block_id=fbi)
    wire = bytes(make_data(comps, meta, content, signer))
    dv = icn_parse_data(wire)
    assert dv.name == b"".join(comps)
    assert dv.name_ends == ends_of(comps)
    assert dv.freshness == (fresh or 0)
    assert dv.content_type == (content_type or 0)
    digest = hashlib.sha256(wire).digest()
    assert dv.implicit_digest == digest
    assert dv.full_name == b"".join([*comps, comp(T.COMP_IMPLICIT_DIGEST, digest)])
    if signer is not None:
        _, _, _, sig = parse_data(wire)
        signed = b"".join(bytes(b) for b in sig.signature_covered_part)
        assert signed == wire[wire.index(Name.to_bytes(comps)) : -34]  # Name..SignatureInfo


@SETTINGS
@given(
    component_lists,
    content_types,
    freshness,
    final_block_ids,
    st.binary(max_size=200),
    st.booleans(),
)
def test_icn_data_read_by_python_ndn(
    comps: list[bytes],
    content_type: int | None,
    fresh: int | None,
    fbi: bytes | None,
    content: bytes,
    signed: bool,
) -> None:
    name = b"".join(comps)
    signer = DIGEST_SHA256 if signed else None
    wire = encode.make_data(
        name, content, freshness=fresh, content_type=content_type, final_block_id=fbi, signer=signer
    )
    got_name, meta, got_content, sig = parse_data(wire)
    assert joined(got_name) == name
    assert bytes(got_content) == content
    assert (meta.content_type or 0) == (content_type or 0)
    assert meta.freshness_period == fresh
    assert _bytes_or_none(meta.final_block_id) == fbi
    if signed:
        assert sig.signature_info.signature_type == SignatureType.DIGEST_SHA256
        assert sig.signature_info.key_locator is None
        covered = b"".join(bytes(b) for b in sig.signature_covered_part)
        assert hashlib.sha256(covered).digest() == bytes(sig.signature_value_buf)
    else:
        assert sig.signature_info is None and sig.signature_value_buf is None
    dv = icn_parse_data(wire)
    assert (dv.name, dv.freshness, dv.content_type) == (name, fresh or 0, content_type or 0)
    assert dv.implicit_digest == hashlib.sha256(wire).digest()


@SETTINGS
@given(component_lists, st.binary(max_size=200), freshness, st.booleans())
def test_data_template_equals_make_data(
    comps: list[bytes], content: bytes, fresh: int | None, signed: bool
) -> None:
    name = b"".join(comps)
    signer = DIGEST_SHA256 if signed else None
    built = encode.DataTemplate(freshness=fresh, signer=signer).build(name, content)
    assert built == encode.make_data(name, content, freshness=fresh, signer=signer)
    meta = MetaInfo(content_type=None, freshness_period=fresh)
    ndn_signer = DigestSha256Signer() if signed else None
    if fresh is None:
        meta = None
    assert built == bytes(make_data(comps, meta, content, ndn_signer))
