"""Lean readers for Interest and Data: pull out only what forwarding needs, in about 1-2 us.

The views keep the original wire bytes so a forwarder sends them on unchanged.  Validation is
that of the NDN packet format v0.3: element order, lengths, NNI widths, the critical-type rule.
Anything malformed raises :class:`DecodeError`.
"""

from __future__ import annotations

import hashlib

from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.name import component_ends
from icn.wire.tlv import encode_varnum, is_critical, read_nni, read_tl, read_varnum

# Legacy (v0.2) ForwardingHint element: Delegation := Preference Name.
_DELEGATION = 31

# Rank of each known Interest element after Name: elements must appear in increasing rank.
_INTEREST_ORDER = {
    T.CAN_BE_PREFIX: 1,
    T.MUST_BE_FRESH: 2,
    T.FORWARDING_HINT: 3,
    T.NONCE: 4,
    T.INTEREST_LIFETIME: 5,
    T.HOP_LIMIT: 6,
    T.APPLICATION_PARAMETERS: 7,
}


class InterestView:
    """What the forwarder needs from an Interest.  ``name`` is the Name TLV-VALUE."""

    __slots__ = (
        "can_be_prefix",
        "forwarding_hint",
        "has_params",
        "hop_limit",
        "hop_limit_pos",
        "lifetime",
        "must_be_fresh",
        "name",
        "name_ends",
        "nonce",
        "nonce_insert_pos",
        "nonce_pos",
        "wire",
    )

    def __init__(self) -> None:
        self.wire = b""
        self.name = b""
        self.name_ends: list[int] = []
        self.can_be_prefix = False
        self.must_be_fresh = False
        self.nonce: bytes | None = None
        self.lifetime = T.DEFAULT_INTEREST_LIFETIME_MS
        self.hop_limit: int | None = None
        self.hop_limit_pos = -1
        self.nonce_pos = -1
        self.nonce_insert_pos = -1
        self.forwarding_hint: bytes | None = None
        self.has_params = False

    @property
    def last_component_type(self) -> int:
        """Type of the last name component (0 for an empty name)."""
        if not self.name_ends:
            return 0
        start = self.name_ends[-2] if len(self.name_ends) > 1 else 0
        typ = self.name[start]
        # Types above 252 take a 3-octet VAR-NUMBER (component types stop at 65535).
        return typ if typ < 253 else read_varnum(self.name, start, len(self.name))[0]

    def with_hop_limit(self, value: int) -> bytes:
        """The wire bytes with the HopLimit octet replaced (the Interest must carry HopLimit)."""
        pos = self.hop_limit_pos
        return self.wire[:pos] + bytes((value,)) + self.wire[pos + 1 :]

    def with_nonce(self, nonce: bytes) -> bytes:
        """The wire bytes with ``nonce`` (4 octets) replacing the Nonce, or inserted if absent."""
        pos = self.nonce_pos
        if pos >= 0:
            return self.wire[:pos] + nonce + self.wire[pos + 4 :]
        ins = self.nonce_insert_pos
        start = _value_start(self.wire)
        value = self.wire[start:ins] + b"\x0a\x04" + nonce + self.wire[ins:]
        return b"\x05" + encode_varnum(len(value)) + value

    def __repr__(self) -> str:
        return (
            f"InterestView(name={self.name.hex()}, nonce={self.nonce!r}, lifetime={self.lifetime})"
        )


class DataView:
    """What the forwarder needs from a Data packet."""

    __slots__ = (
        "_digest",
        "content_end",
        "content_start",
        "content_type",
        "freshness",
        "name",
        "name_ends",
        "sig_info_end",
        "sig_info_start",
        "sig_value_end",
        "sig_value_start",
        "wire",
    )

    def __init__(self) -> None:
        self.wire = b""
        self.name = b""
        self.name_ends: list[int] = []
        self.freshness = 0
        self.content_type = T.CONTENT_BLOB
        self._digest: bytes | None = None
        # where parse_data found the values of Content, SignatureInfo and SignatureValue, so an
        # app reads the content and checks the signature without parsing the packet again
        # (the signed portion ends where SignatureInfo does).  -1: absent, or not parsed here
        self.content_start = self.content_end = -1
        self.sig_info_start = self.sig_info_end = -1
        self.sig_value_start = self.sig_value_end = -1

    @property
    def implicit_digest(self) -> bytes:
        """SHA-256 of the whole Data TLV, computed once on demand."""
        if self._digest is None:
            self._digest = hashlib.sha256(self.wire).digest()
        return self._digest

    @property
    def full_name(self) -> bytes:
        """Name value with the ImplicitSha256Digest component appended."""
        return self.name + b"\x01\x20" + self.implicit_digest

    def __repr__(self) -> str:
        return f"DataView(name={self.name.hex()}, freshness={self.freshness})"


def _value_start(wire: bytes) -> int:
    return read_tl(wire, 0, len(wire))[1]


def _outer(wire: bytes, expect: int) -> int:
    typ, vstart, vend = read_tl(wire, 0, len(wire))
    if typ != expect:
        raise DecodeError(f"expected TLV type {expect}, got {typ}")
    if vend != len(wire):
        raise DecodeError("trailing bytes after packet")
    return vstart


def parse_interest(wire: bytes) -> InterestView:
    """Read an Interest packet (the whole TLV, type 5)."""
    end = len(wire)
    off = _outer(wire, T.INTEREST)
    typ, nstart, nend = read_tl(wire, off, end)
    if typ != T.NAME:
        raise DecodeError("Interest must start with Name")
    iv = InterestView()
    iv.wire = wire
    iv.name = wire[nstart:nend]
    iv.name_ends = ends = component_ends(wire, nstart, nend)
    if not ends:
        raise DecodeError("Interest Name must have at least one component")
    off = nend
    iv.nonce_insert_pos = nend
    rank = 0
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        r = _INTEREST_ORDER.get(typ)
        if r is None or r <= rank:
            # Unknown or out of order: skipped if non-critical, as ndn-cxx does.  After
            # ApplicationParameters that covers the signature fields (types 44 and 46), which
            # belong to the parameters block; a critical type there is an error like anywhere.
            if not is_critical(typ):
                off = vend
                continue
            raise DecodeError(f"unexpected or out-of-order critical element {typ} in Interest")
        rank = r
        if r < 4:
            iv.nonce_insert_pos = vend
        length = vend - vstart
        if typ == T.NONCE:
            if length != 4:
                raise DecodeError("Nonce must be 4 octets")
            iv.nonce = wire[vstart:vend]
            iv.nonce_pos = vstart
        elif typ == T.INTEREST_LIFETIME:
            iv.lifetime = read_nni(wire, vstart, vend)
        elif typ == T.CAN_BE_PREFIX:
            if length:
                raise DecodeError("CanBePrefix must be empty")
            iv.can_be_prefix = True
        elif typ == T.MUST_BE_FRESH:
            if length:
                raise DecodeError("MustBeFresh must be empty")
            iv.must_be_fresh = True
        elif typ == T.HOP_LIMIT:
            if length != 1:
                raise DecodeError("HopLimit must be 1 octet")
            iv.hop_limit = wire[vstart]
            iv.hop_limit_pos = vstart
        elif typ == T.FORWARDING_HINT:
            _check_forwarding_hint(wire, vstart, vend)
            iv.forwarding_hint = wire[vstart:vend]
        else:  # ApplicationParameters: the rest of the packet is the parameters block
            iv.has_params = True
        off = vend
    if _params_digest_count(iv.name, ends) != iv.has_params:
        raise DecodeError(
            "ApplicationParameters need exactly one ParametersSha256Digest component, "
            "and that component needs ApplicationParameters"
        )
    return iv


def _params_digest_count(name: bytes, ends: list[int]) -> int:
    count = 0
    prev = 0
    for e in ends:
        if name[prev] == T.COMP_PARAMS_DIGEST:
            count += 1
        prev = e
    return count


def _check_forwarding_hint(wire: bytes, off: int, end: int) -> None:
    """ForwardingHint := 1*Name, or the legacy 1*Delegation (Preference Name).  Checked as
    ndn-cxx does, so a forwarder never passes on a hint that NFD would reject."""
    while off < end:
        typ, vstart, off = read_tl(wire, off, end)
        if typ == T.NAME:
            component_ends(wire, vstart, off)
        elif typ == _DELEGATION:
            _check_delegation(wire, vstart, off)
        elif is_critical(typ):
            raise DecodeError(f"unexpected element {typ} in ForwardingHint")


def hint_names(value: bytes) -> list[bytes]:
    """The Name TLV-VALUEs of a ForwardingHint's TLV-VALUE (:attr:`InterestView.forwarding_hint`,
    already checked by :func:`parse_interest`), in the order given: its Names, or the Names of
    its legacy Delegations in their order on the wire (NFD ignores their Preference too)."""
    names: list[bytes] = []
    off, end = 0, len(value)
    while off < end:
        typ, vstart, off = read_tl(value, off, end)
        if typ == T.NAME:
            names.append(value[vstart:off])
        elif typ == _DELEGATION:
            inner = vstart
            while inner < off:
                ityp, istart, inner = read_tl(value, inner, off)
                if ityp == T.NAME:
                    names.append(value[istart:inner])
                    break
    return names


def _check_delegation(wire: bytes, off: int, end: int) -> None:
    while off < end:
        typ, vstart, off = read_tl(wire, off, end)
        if typ == T.NAME:
            component_ends(wire, vstart, off)
            return
    raise DecodeError("ForwardingHint Delegation without a Name")


def parse_data(wire: bytes) -> DataView:
    """Read a Data packet (the whole TLV, type 6)."""
    end = len(wire)
    off = _outer(wire, T.DATA)
    typ, nstart, nend = read_tl(wire, off, end)
    if typ != T.NAME:
        raise DecodeError("Data must start with Name")
    dv = DataView()
    dv.wire = wire
    dv.name = wire[nstart:nend]
    dv.name_ends = component_ends(wire, nstart, nend)
    off = nend
    rank = 0
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        if typ == T.META_INFO and rank < 1:
            rank = 1
            _read_meta_info(wire, vstart, vend, dv)
        elif typ == T.CONTENT and rank < 2:
            rank = 2
            dv.content_start, dv.content_end = vstart, vend
        elif typ == T.SIGNATURE_INFO and rank < 3:
            rank = 3
            dv.sig_info_start, dv.sig_info_end = vstart, vend
        elif typ == T.SIGNATURE_VALUE and rank == 3:
            rank = 4
            dv.sig_value_start, dv.sig_value_end = vstart, vend
        elif is_critical(typ):
            raise DecodeError(f"unexpected or out-of-order critical element {typ} in Data")
        off = vend
    if rank == 3:
        raise DecodeError("Data has SignatureInfo but no SignatureValue")
    return dv


def _read_meta_info(wire: bytes, off: int, end: int, dv: DataView) -> None:
    rank = 0
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        if typ == T.CONTENT_TYPE and rank < 1:
            rank = 1
            dv.content_type = read_nni(wire, vstart, vend)
        elif typ == T.FRESHNESS_PERIOD and rank < 2:
            rank = 2
            dv.freshness = read_nni(wire, vstart, vend)
        elif typ == T.FINAL_BLOCK_ID and rank < 3:
            rank = 3
            if len(component_ends(wire, vstart, vend)) != 1:
                raise DecodeError("FinalBlockId must hold exactly one name component")
        elif is_critical(typ):
            raise DecodeError(f"unexpected critical element {typ} in MetaInfo")
        off = vend


def packet_type(wire: bytes) -> int:
    """Outer TLV-TYPE of a packet (0 if empty or unreadable); Interest, Data and LpPacket types
    are all below 253, so one octet tells."""
    return wire[0] if wire else 0
