"""TLV primitives: VAR-NUMBER, NonNegativeInteger and the critical-type rule.

Readers take ``bytes`` (or anything indexable as ints, e.g. a memoryview) and an offset, and return
the value with the next offset; they raise :class:`DecodeError` on truncated or non-minimal input.
"""

from __future__ import annotations

from collections.abc import Iterator

from icn.errors import DecodeError, EncodeError

Buffer = bytes | bytearray | memoryview

# TLV-TYPE range is [1, 2^32-1]: a TYPE never takes the 9-octet VAR-NUMBER form.
_MAX_TYPE = (1 << 32) - 1


def read_varnum(buf: Buffer, off: int, end: int) -> tuple[int, int]:
    """Read a VAR-NUMBER at ``off`` (which must be < ``end``); shortest form is enforced."""
    if off >= end:
        raise DecodeError("truncated VAR-NUMBER")
    first = buf[off]
    if first < 253:
        return first, off + 1
    if first == 253:
        if off + 3 > end:
            raise DecodeError("truncated VAR-NUMBER")
        value = (buf[off + 1] << 8) | buf[off + 2]
        if value < 253:
            raise DecodeError("non-minimal VAR-NUMBER")
        return value, off + 3
    if first == 254:
        if off + 5 > end:
            raise DecodeError("truncated VAR-NUMBER")
        value = int.from_bytes(buf[off + 1 : off + 5], "big")
        if value < 65536:
            raise DecodeError("non-minimal VAR-NUMBER")
        return value, off + 5
    if off + 9 > end:
        raise DecodeError("truncated VAR-NUMBER")
    value = int.from_bytes(buf[off + 1 : off + 9], "big")
    if value < 1 << 32:
        raise DecodeError("non-minimal VAR-NUMBER")
    return value, off + 9


def read_tl(buf: Buffer, off: int, end: int) -> tuple[int, int, int]:
    """Read a TLV header at ``off``; return (type, value start, value end). Checks the bounds."""
    if off + 2 <= end:
        typ = buf[off]
        length = buf[off + 1]
        if 0 < typ < 253 and length < 253:
            vend = off + 2 + length
            if vend > end:
                raise DecodeError(f"TLV type {typ} length {length} overruns its parent")
            return typ, off + 2, vend
    return _read_tl_slow(buf, off, end)


def _read_tl_slow(buf: Buffer, off: int, end: int) -> tuple[int, int, int]:
    typ, off = read_varnum(buf, off, end)
    length, off = read_varnum(buf, off, end)
    if typ == 0 or typ > _MAX_TYPE:
        raise DecodeError(f"TLV-TYPE {typ} is outside [1, 2^32-1]")
    vend = off + length
    if vend > end:
        raise DecodeError(f"TLV type {typ} length {length} overruns its parent")
    return typ, off, vend


def encode_varnum(value: int) -> bytes:
    """Shortest-form VAR-NUMBER encoding."""
    if value < 0:
        raise EncodeError(f"VAR-NUMBER cannot be negative: {value}")
    if value < 253:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfd" + value.to_bytes(2, "big")
    if value < 1 << 32:
        return b"\xfe" + value.to_bytes(4, "big")
    if value < 1 << 64:
        return b"\xff" + value.to_bytes(8, "big")
    raise EncodeError(f"VAR-NUMBER too large: {value}")


def encode_tlv(typ: int, value: Buffer = b"") -> bytes:
    """One TLV element."""
    return encode_varnum(typ) + encode_varnum(len(value)) + bytes(value)


def read_nni(buf: Buffer, start: int, end: int) -> int:
    """Decode a NonNegativeInteger value occupying ``buf[start:end]`` (1, 2, 4 or 8 octets)."""
    length = end - start
    if length == 1:
        return buf[start]
    if length in (2, 4, 8):
        return int.from_bytes(buf[start:end], "big")
    raise DecodeError(f"NonNegativeInteger of {length} octets")


def encode_nni(value: int) -> bytes:
    """Smallest of the 1, 2, 4 or 8 octet encodings."""
    if value < 0:
        raise EncodeError(f"NonNegativeInteger cannot be negative: {value}")
    if value < 1 << 8:
        return bytes((value,))
    if value < 1 << 16:
        return value.to_bytes(2, "big")
    if value < 1 << 32:
        return value.to_bytes(4, "big")
    if value < 1 << 64:
        return value.to_bytes(8, "big")
    raise EncodeError(f"NonNegativeInteger too large: {value}")


def encode_nni_tlv(typ: int, value: int) -> bytes:
    return encode_tlv(typ, encode_nni(value))


def is_critical(typ: int) -> bool:
    """Evolvability rule: types 0-31 and odd types are critical; unknown critical -> reject."""
    return typ <= 31 or bool(typ & 1)


def iter_tlvs(buf: Buffer, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """Yield (type, value start, value end) for consecutive TLVs in ``buf[start:end]``."""
    off = start
    while off < end:
        typ, vstart, vend = read_tl(buf, off, end)
        yield typ, vstart, vend
        off = vend


def frame_length(buf: Buffer, off: int, end: int) -> int | None:
    """Total size of the TLV starting at ``off`` if its header is complete, else ``None``.

    Used by stream transports to cut back-to-back TLVs; raises DecodeError on a bad header.
    """
    try:
        typ, voff = read_varnum(buf, off, end)
        length, voff = read_varnum(buf, voff, end)
    except DecodeError as exc:
        if "truncated" in str(exc):
            return None
        raise
    if typ == 0 or typ > _MAX_TYPE:
        raise DecodeError(f"TLV-TYPE {typ} is outside [1, 2^32-1]")
    return voff - off + length
