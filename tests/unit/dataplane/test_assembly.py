"""Segments reassembled in one buffer as they arrive (icn.dataplane.segments.Assembly)."""

from __future__ import annotations

import random

import pytest

from icn.dataplane.segments import Assembly
from icn.errors import DecodeError


def pieces(data: bytes, step: int) -> list[bytes]:
    return [data[i : i + step] for i in range(0, len(data), step)]


@pytest.mark.parametrize("size", [1, 999, 1000, 1001, 25_000])
def test_any_arrival_order_gives_the_object_in_place(size: int) -> None:
    data = random.Random(size).randbytes(size)
    segs = pieces(data, 1000)
    final = len(segs) - 1
    order = list(range(len(segs)))
    random.Random(7).shuffle(order)
    parts = Assembly(b"", 1 << 20)
    parts.put(0, memoryview(segs[0]), final)
    for seg in order:
        parts.put(seg, memoryview(segs[seg]), final)  # segment 0 again: ignored
    assert parts.pieces is None  # every segment went straight into the buffer
    assert parts.result(final) == data


def test_the_end_learnt_late_and_a_short_last_segment() -> None:
    data = bytes(range(256)) * 10  # 2560 bytes: 1000, 1000, 560
    segs = pieces(data, 1000)
    parts = Assembly(b"", 1 << 20)
    parts.put(1, memoryview(segs[1]), None)
    parts.put(0, memoryview(segs[0]), None)
    parts.put(2, memoryview(segs[2]), 2)
    assert parts.pieces is None
    assert parts.result(2) == data


def test_segments_of_other_sizes_are_kept_apart_and_joined() -> None:
    segs = [b"a" * 10, b"b" * 4, b"c" * 10, b"d" * 3]
    parts = Assembly(b"", 1 << 20)
    parts.put(0, memoryview(segs[0]), 3)
    parts.put(2, memoryview(segs[2]), 3)
    parts.put(1, memoryview(segs[1]), 3)  # shorter, and not the last: no fixed places
    parts.put(3, memoryview(segs[3]), 3)
    assert parts.pieces is not None
    assert 0 in parts and 2 in parts and 3 in parts
    assert parts.result(3) == b"".join(segs)


def test_larger_than_allowed_is_refused() -> None:
    parts = Assembly(b"\x08\x01x", 1500)
    parts.put(0, memoryview(b"x" * 1000), None)
    with pytest.raises(DecodeError, match="larger than 1500"):
        parts.put(1, memoryview(b"y" * 1000), None)


def test_a_final_block_past_the_bound_is_refused_before_any_buffer() -> None:
    parts = Assembly(b"\x08\x01x", 1 << 20)
    with pytest.raises(DecodeError, match="larger than"):
        parts.put(0, memoryview(b"x" * 1000), 1 << 40)  # would be a 1 PB buffer
    assert not parts.buf
