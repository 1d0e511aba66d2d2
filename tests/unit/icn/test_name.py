"""Names: icn.wire.name against python-ndn (component split, URIs, prefixes) and the byte-order
claim.

The hypothesis strategies here (``components``, ``names``) are shared with the other codec tests:
they cover every component type the stack meets, so a mismatch on any of them shows up.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ndn.encoding import Component, Name

from icn.errors import ConfigError, DecodeError
from icn.wire import name as N
from icn.wire import tlv_types as T
from icn.wire.tlv import encode_nni

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_NNI_TYPES = (
    T.COMP_SEGMENT,
    T.COMP_BYTE_OFFSET,
    T.COMP_VERSION,
    T.COMP_TIMESTAMP,
    T.COMP_SEQUENCE_NUM,
)
# Widths 1, 2, 4 and 8 all show up: each range ends right at a width boundary.
nni_values = st.one_of(
    st.integers(0, 255),
    st.integers(256, 65535),
    st.integers(65536, 2**32 - 1),
    st.integers(2**32, 2**64 - 1),
)


def comp(typ: int, value: bytes) -> bytes:
    """A component TLV built by python-ndn, so the tests never trust icn to build their input."""
    return bytes(Component.from_bytes(value, typ))


generic_components = st.binary(max_size=40).map(lambda v: comp(T.COMP_GENERIC, v))
nni_components = st.builds(
    lambda t, n: comp(t, encode_nni(n)), st.sampled_from(_NNI_TYPES), nni_values
)
keyword_components = st.binary(max_size=20).map(lambda v: comp(T.COMP_KEYWORD, v))
implicit_digest_components = st.binary(min_size=32, max_size=32).map(
    lambda v: comp(T.COMP_IMPLICIT_DIGEST, v)
)
params_digest_components = st.binary(min_size=32, max_size=32).map(
    lambda v: comp(T.COMP_PARAMS_DIGEST, v)
)
reflexive_components = st.binary(max_size=24).map(lambda v: comp(T.COMP_REFLEXIVE, v))
# Other types, including ones whose TLV-TYPE takes the 3-octet VAR-NUMBER form.
other_components = st.builds(
    comp,
    st.one_of(st.integers(3, 6), st.integers(9, 31), st.integers(60, 252), st.integers(253, 65535)),
    st.binary(max_size=12),
)

# Every component type except ParametersSha256Digest, which an Interest may carry only with
# ApplicationParameters (tests that want it add it on purpose).
components = st.one_of(
    generic_components,
    nni_components,
    keyword_components,
    implicit_digest_components,
    reflexive_components,
    other_components,
)
# Lists of component TLVs; ``names`` joins them into a name value.
component_lists = st.lists(components, max_size=8)
nonempty_component_lists = st.lists(components, min_size=1, max_size=8)
names = component_lists.map(b"".join)


def ndn_split(name: bytes) -> list[bytes]:
    """python-ndn's split of a name value into component TLVs (its encoder only concatenates, so
    the whole value can go in as one piece)."""
    return [bytes(c) for c in Name.decode(Name.encode([name]))[0]]


@SETTINGS
@given(component_lists)
def test_component_ends_agree_with_python_ndn(comps: list[bytes]) -> None:
    name = b"".join(comps)
    ends = N.component_ends(name)
    pieces = [name[a:b] for a, b in zip([0, *ends], ends, strict=False)]
    assert pieces == ndn_split(name) == comps
    assert N.components(name) == comps


@SETTINGS
@given(component_lists)
def test_component_ends_inside_a_larger_buffer(comps: list[bytes]) -> None:
    name = b"".join(comps)
    buf = b"\xaa\xbb" + name + b"\xcc"
    assert N.component_ends(buf, 2, 2 + len(name)) == N.component_ends(name)


@SETTINGS
@given(component_lists)
def test_to_uri_matches_python_ndn_and_round_trips(comps: list[bytes]) -> None:
    name = b"".join(comps)
    uri = N.to_uri(name)
    assert uri == Name.to_str(comps)
    assert N.from_uri(uri) == name


@SETTINGS
@given(st.lists(st.text(max_size=12).filter(lambda s: "/" not in s), min_size=1, max_size=5))
def test_from_uri_matches_python_ndn_on_text(parts: list[str]) -> None:
    uri = "/" + "/".join(parts)
    try:
        expected = b"".join(bytes(c) for c in Name.from_str(uri))
    except (ValueError, IndexError):
        with pytest.raises(ConfigError):
            N.from_uri(uri)
        return
    try:
        N.component_ends(expected)
    except DecodeError:  # python-ndn built a digest component of the wrong size
        with pytest.raises(ConfigError):
            N.from_uri(uri)
        return
    assert N.from_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "comps"),
    [
        ("/", []),
        ("/a/b", [comp(8, b"a"), comp(8, b"b")]),
        ("/a//b", [comp(8, b"a"), comp(8, b""), comp(8, b"b")]),
        ("/seg=3/v=256", [comp(50, b"\x03"), comp(54, b"\x01\x00")]),
        ("/32=kw/59=%01%02", [comp(32, b"kw"), comp(59, b"\x01\x02")]),
        ("/sha256digest=" + "ab" * 32, [comp(1, b"\xab" * 32)]),
        ("/params-sha256=" + "cd" * 32, [comp(2, b"\xcd" * 32)]),
        ("/300=x", [comp(300, b"x")]),
    ],
)
def test_from_uri_examples(uri: str, comps: list[bytes]) -> None:
    assert N.from_uri(uri) == b"".join(comps)


@pytest.mark.parametrize(
    "uri", ["/a/sha256digest=abcd", "/a/1=x", "/params-sha256=00", "/a/%zz", "/70000=x", "/0=x"]
)
def test_from_uri_rejects_bad_names(uri: str) -> None:
    with pytest.raises(ConfigError):
        N.from_uri(uri)


@SETTINGS
@given(component_lists)
def test_prefixes_are_slices_at_component_boundaries(comps: list[bytes]) -> None:
    name = b"".join(comps)
    ends = N.component_ends(name)
    all_prefixes = N.prefixes(name, ends)
    assert len(all_prefixes) == len(comps) + 1
    for k in range(len(comps) + 2):
        expected = b"".join(comps[:k])
        assert N.prefix(name, k) == expected
        assert Name.to_bytes(comps[:k]) == N.encode_name(expected)
        if k <= len(comps):
            assert all_prefixes[k] == expected
        assert N.is_prefix(expected, name)
    assert N.prefix(name, -1) == b""


@SETTINGS
@given(component_lists, component_lists)
def test_is_prefix_agrees_with_python_ndn(a: list[bytes], b: list[bytes]) -> None:
    assert N.is_prefix(b"".join(a), b"".join(b)) == Name.is_prefix(a, b)
    assert N.is_prefix(b"".join(a), b"".join(a + b))


def _canonical_key(comps: list[bytes]) -> list[tuple[int, int, bytes]]:
    """NDN canonical order: component-wise by (type, value length, value); a prefix sorts first."""
    key = []
    for c in comps:
        typ = Component.get_type(c)
        value = bytes(Component.get_value(c))
        key.append((typ, len(value), value))
    return key


@SETTINGS
@given(st.lists(component_lists, min_size=2, max_size=6))
def test_byte_order_of_name_values_is_canonical_order(lists: list[list[bytes]]) -> None:
    # The design keys tables by name bytes and relies on this equivalence for prefix ranges.
    by_bytes = sorted(lists, key=b"".join)
    by_canon = sorted(lists, key=_canonical_key)
    assert [b"".join(c) for c in by_bytes] == [b"".join(c) for c in by_canon]


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (b"\x00\x01a", "type 0"),
        (b"\x01\x1f" + b"\x00" * 31, "implicit digest of 31 octets"),
        (b"\x02\x21" + b"\x00" * 33, "params digest of 33 octets"),
        (b"\x01\x00", "empty implicit digest"),
        (b"\x08\x05abc", "overrun"),
        (b"\x08", "truncated header"),
        (b"\xfe\x00\x01\x00\x00\x01a", "type 65536"),
        (b"\x08\xfd\x00\x03abc", "non-minimal length"),
    ],
)
def test_component_ends_rejects(bad: bytes, why: str) -> None:
    with pytest.raises(DecodeError):
        N.component_ends(bad)


def test_component_builders_match_python_ndn() -> None:
    assert N.generic("abc") == N.generic(b"abc") == bytes(Component.from_str("abc"))
    for n in (0, 255, 256, 65536, 2**32, 2**64 - 1):
        assert N.segment(n) == bytes(Component.from_segment(n))
        assert N.version(n) == bytes(Component.from_version(n))
        assert N.sequence_num(n) == bytes(Component.from_sequence_num(n))
    data = b"\x06\x02\x07\x00"
    digest = hashlib.sha256(data).digest()
    assert N.implicit_digest_component(data) == comp(T.COMP_IMPLICIT_DIGEST, digest)
    rnp = bytes(range(16))
    assert N.reflexive_component(rnp) == comp(T.COMP_REFLEXIVE, rnp)
    assert N.component_ends(N.reflexive_component(rnp)) == [18]
