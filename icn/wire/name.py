"""Name helpers.

A name is handled as the bytes of its Name TLV-VALUE (the concatenated component TLVs).  A prefix
of k components is a slice of those bytes up to the k-th component boundary, so names under a
prefix are contiguous in byte order, which is also NDN's canonical order.  URI conversion goes
through python-ndn, the reference codec.
"""

from __future__ import annotations

import hashlib

from ndn.encoding import Name as NdnName

from icn.errors import ConfigError, DecodeError, EncodeError
from icn.wire import tlv_types as T
from icn.wire.tlv import Buffer, encode_nni, encode_tlv, encode_varnum, read_tl

DIGEST_COMPONENT_TYPES = (T.COMP_IMPLICIT_DIGEST, T.COMP_PARAMS_DIGEST)


def component_ends(name: Buffer, start: int = 0, end: int | None = None) -> list[int]:
    """End offsets (relative to ``start``) of each component; validates component types/lengths."""
    if end is None:
        end = len(name)
    ends: list[int] = []
    off = start
    while off < end:
        # fast path: one-octet type and length, the common case
        typ = name[off]
        if 2 < typ < 253 and off + 1 < end and name[off + 1] < 253:
            off += 2 + name[off + 1]
            if off > end:
                raise DecodeError("name component overruns the name")
        else:
            typ, vstart, off = read_tl(name, off, end)
            if typ > 65535:
                raise DecodeError(f"name component type {typ} out of range")
            if typ <= 2 and off - vstart != 32:
                raise DecodeError("digest name component must be 32 octets")
        ends.append(off - start)
    return ends


def components(name: Buffer) -> list[bytes]:
    """The component TLVs of a name value, each with its own type and length."""
    out: list[bytes] = []
    prev = 0
    for e in component_ends(name):
        out.append(bytes(name[prev:e]))
        prev = e
    return out


def prefixes(name: bytes, ends: list[int]) -> list[bytes]:
    """All prefixes of ``name`` from the empty name up to the full name (len(ends)+1 items)."""
    return [b""] + [name[:e] for e in ends]


def prefix(name: bytes, k: int) -> bytes:
    """The prefix of ``name`` with ``k`` components (k may exceed the length: whole name)."""
    if k <= 0:
        return b""
    ends = component_ends(name)
    return name if k >= len(ends) else name[: ends[k - 1]]


def is_prefix(prefix_name: bytes, name: bytes) -> bool:
    """True if ``prefix_name`` (a whole-component name value) is a prefix of ``name``.

    A byte-prefix test is enough: ``prefix_name`` ends at a component boundary and every
    component is self-delimiting, so a byte prefix is a component prefix.
    """
    return name.startswith(prefix_name)


def from_uri(uri: str) -> bytes:
    """Parse an NDN URI (``/a/b/seg=3``) into a name value.  Raises ConfigError on bad input."""
    try:
        comps = NdnName.from_str(uri)
    except (ValueError, TypeError, IndexError) as exc:
        raise ConfigError(f"invalid NDN name {uri!r}: {exc}") from None
    name = b"".join(bytes(c) for c in comps)
    # python-ndn builds digest components of any length (``sha256digest=ab``, ``1=x``); such a
    # name would only fail later, on the wire, so catch it here where the user can fix it.
    try:
        component_ends(name)
    except DecodeError as exc:
        hint = "sha256digest= and params-sha256= take exactly 64 hex digits"
        raise ConfigError(f"invalid NDN name {uri!r}: {exc} ({hint})") from None
    return name


def components_after(prefix: bytes, name: bytes) -> list[bytes] | None:
    """The components of ``name`` after ``prefix`` (whole TLVs), or None if ``name`` is not
    under ``prefix`` or what follows is not well-formed (bad input from the network)."""
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    if not rest:
        return []
    try:
        ends = component_ends(rest)
    except DecodeError:
        return None
    starts = [0, *ends[:-1]]
    return [rest[s:e] for s, e in zip(starts, ends, strict=True)]


def to_uri(name: Buffer) -> str:
    """Render a name value as an NDN URI."""
    return str(NdnName.to_str([bytes(c) for c in components(name)]))


def encode_name(name: Buffer) -> bytes:
    """The full Name TLV for a name value."""
    return encode_tlv(T.NAME, name)


def generic(value: bytes | str) -> bytes:
    """A GenericNameComponent TLV."""
    if isinstance(value, str):
        value = value.encode()
    return encode_tlv(T.COMP_GENERIC, value)


def _nni_component(typ: int, value: int) -> bytes:
    return encode_tlv(typ, encode_nni(value))


def segment(n: int) -> bytes:
    return _nni_component(T.COMP_SEGMENT, n)


def version(n: int) -> bytes:
    return _nni_component(T.COMP_VERSION, n)


def sequence_num(n: int) -> bytes:
    return _nni_component(T.COMP_SEQUENCE_NUM, n)


def implicit_digest_component(data_wire: bytes) -> bytes:
    """The ImplicitSha256Digest component of a Data packet (SHA-256 of the whole TLV)."""
    return b"\x01\x20" + hashlib.sha256(data_wire).digest()


def reflexive_component(rnp: bytes) -> bytes:
    """The Reflexive Name Segment carrying a Reflexive Name Prefix."""
    return encode_varnum(T.COMP_REFLEXIVE) + encode_varnum(len(rnp)) + rnp


NameLike = bytes | str


def as_name(name: NameLike) -> bytes:
    """A URI (``/a/b``) or a name value, checked, as a name value."""
    if isinstance(name, str):
        return from_uri(name)
    try:
        component_ends(name)
    except DecodeError as exc:
        raise EncodeError(f"malformed name value {bytes(name).hex()}: {exc}") from None
    return bytes(name)
