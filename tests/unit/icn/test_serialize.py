"""Application values: msgpack round trips (hypothesis), numpy arrays and scalars through the
extension types, the documented conversions (tuples to lists), large payloads, and bad input
refused with EncodeError / DecodeError rather than a raw msgpack or numpy exception.
"""

from __future__ import annotations

import contextlib
import enum
import struct
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from icn.errors import DecodeError, EncodeError
from icn.wire.serialize import EXT_NDARRAY, EXT_NPSCALAR, pack, unpack
from tests.unit.icn.test_name import SETTINGS

# every plain dtype kind, in both byte orders where byte order means something
plain_dtypes = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="="),
    hnp.unsigned_integer_dtypes(endianness="="),
    hnp.floating_dtypes(endianness="="),
    hnp.complex_number_dtypes(endianness="="),
    hnp.datetime64_dtypes(endianness="="),
    hnp.timedelta64_dtypes(endianness="="),
    hnp.byte_string_dtypes(endianness="="),
    hnp.unicode_string_dtypes(endianness="="),
)
arrays = hnp.arrays(plain_dtypes, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)
keys = st.one_of(st.text(), st.binary(), st.integers(-(2**63), 2**64 - 1), st.booleans())
# what comes back is what went in: lists, not tuples (those are tested on their own)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=20,
)


def assert_same_array(got: Any, want: np.ndarray[Any, Any]) -> None:
    assert type(got) is np.ndarray
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(values)
def test_plain_values_round_trip(value: Any) -> None:
    assert unpack(pack(value)) == value


@SETTINGS
@given(arrays)
def test_arrays_round_trip_with_dtype_and_shape(arr: np.ndarray[Any, Any]) -> None:
    assert_same_array(unpack(pack(arr)), arr)


@SETTINGS
@given(arrays)
def test_non_contiguous_arrays_come_back_c_contiguous(arr: np.ndarray[Any, Any]) -> None:
    view = arr.T[..., ::2] if arr.ndim else arr
    got = unpack(pack(view))
    assert_same_array(got, view)
    assert got.flags.c_contiguous


@SETTINGS
@given(plain_dtypes.flatmap(hnp.from_dtype).filter(lambda v: isinstance(v, np.generic)))
def test_numpy_scalars_keep_their_type(value: np.generic) -> None:
    got = unpack(pack(value))
    assert type(got) is type(value)
    assert got.dtype == value.dtype
    np.testing.assert_array_equal(got, value)


@SETTINGS
@given(st.lists(arrays, max_size=3), st.dictionaries(st.text(max_size=5), arrays, max_size=3))
def test_arrays_nested_in_containers(items: list[Any], mapping: dict[str, Any]) -> None:
    got = unpack(pack({"items": items, "mapping": mapping}))
    for g, w in zip(got["items"], items, strict=True):
        assert_same_array(g, w)
    assert got["mapping"].keys() == mapping.keys()
    for k, w in mapping.items():
        assert_same_array(got["mapping"][k], w)


def test_float64_scalar_stays_numpy_though_it_subclasses_float() -> None:
    got = unpack(pack([np.float64(2.5), 2.5]))
    assert type(got[0]) is np.float64
    assert type(got[1]) is float


def test_tuples_come_back_as_lists() -> None:
    assert unpack(pack((1, (2, 3), [4, (5,)]))) == [1, [2, 3], [4, [5]]]


def test_builtin_subclasses_come_back_as_the_builtin() -> None:
    # a (str, Enum) mixin, not StrEnum: its str() is "Color.RED", and the value must travel
    class Color(str, enum.Enum):  # noqa: UP042
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    got = unpack(
        pack({"c": Color.RED, "l": Level.HIGH, "b": bytearray(b"x"), "m": memoryview(b"y")})
    )
    assert got == {"c": "red", "l": 3, "b": b"x", "m": b"y"}
    assert type(got["c"]) is str and type(got["l"]) is int


def test_decoded_arrays_are_read_only_aligned_views() -> None:
    got = unpack(pack(np.arange(1000, dtype=np.float64)))
    assert not got.flags.writeable
    assert got.flags.aligned
    with pytest.raises(ValueError):
        got[0] = 1.0
    copy = got.copy()
    copy[0] = 1.0  # a copy is writable
    assert not unpack(pack(np.zeros((0, 3)))).flags.writeable


def test_large_bytes_and_arrays() -> None:
    big = bytes(range(256)) * (64 * 1024 * 4)  # 64 MiB
    assert len(big) == 64 << 20
    assert unpack(pack(big)) == big
    arr = np.arange(8 << 20, dtype=np.float64)  # 64 MiB
    assert_same_array(unpack(pack(arr)), arr)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({1, 2}, "builtins.set"),
        (object(), "builtins.object"),
        (np.array([object()]), "dtype object"),
        (np.zeros(2, dtype=[("a", "f8"), ("b", "i4")]), "dtype"),
        (np.ma.masked_array([1, 2], mask=[False, True]), "masked"),
        ([1, {"k": 1j}], "builtins.complex"),
        (2**64, "out of range"),
    ],
)
def test_unsupported_values_raise_encode_error(value: Any, named: str) -> None:
    with pytest.raises(EncodeError, match=named):
        pack(value)


def test_deep_nesting_raises_encode_error() -> None:
    deep: list[Any] = []
    for _ in range(2000):
        deep = [deep]
    with pytest.raises(EncodeError):
        pack(deep)


def _ext_payload(header: Any, raw: bytes = b"") -> bytes:
    """An array extension payload as icn.wire.serialize lays it out, with any header."""
    hdr: bytes = msgpack.packb(header)
    start = -(-(2 + len(hdr)) // 16) * 16
    return struct.pack(">H", len(hdr)) + hdr + bytes(start - 2 - len(hdr)) + raw


def _ext(code: int, payload: bytes) -> bytes:
    return bytes(msgpack.packb(msgpack.ExtType(code, payload)))


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "incomplete"),
        (b"\x92\x01", "incomplete"),
        (b"\xc1", "FormatError"),
        (b"\x01\x02", "ExtraData"),
        (b"\x91" * 100_000, "StackError"),
        (b"\x81\x91\x01\x02", "map key"),
        (b"\xa2\xff\xfe", "utf-8"),
        (_ext(99, b"x"), "unknown msgpack extension type 99"),
        (_ext(EXT_NDARRAY, b"\x00"), "shorter than its header length"),
        (_ext(EXT_NDARRAY, b"\x00\x40abc"), "shorter than its header"),
        (_ext(EXT_NDARRAY, _ext_payload(["<f8"])), r"not \[dtype, shape\]"),
        (_ext(EXT_NDARRAY, _ext_payload(7)), r"not \[dtype, shape\]"),
        (_ext(EXT_NDARRAY, _ext_payload(["nonsense", [1]])), r"not \[dtype, shape\]"),
        (_ext(EXT_NDARRAY, _ext_payload(["|O", [1]], bytes(8))), "unsupported dtype"),
        (_ext(EXT_NDARRAY, _ext_payload(["(2,)<f8", [1]], bytes(16))), "unsupported dtype"),
        (_ext(EXT_NDARRAY, _ext_payload([8, [1]], bytes(8))), "unsupported dtype"),
        (_ext(EXT_NDARRAY, _ext_payload(["<f8", [-1]])), "bad shape"),
        (_ext(EXT_NDARRAY, _ext_payload(["<f8", "3"])), "bad shape"),
        (_ext(EXT_NDARRAY, _ext_payload(["<f8", [2]], bytes(15))), "needs 16 bytes, has 15"),
        (_ext(EXT_NDARRAY, _ext_payload(["<f8", [2**62, 2**62]], bytes(8))), "needs"),
        (_ext(EXT_NDARRAY, _ext_payload(["<f8", [0, 2**63]])), "not a serialized value"),
        (_ext(EXT_NPSCALAR, _ext_payload(["<f8", [2]], bytes(16))), "shape"),
    ],
)
def test_bad_input_raises_decode_error(data: bytes, why: str) -> None:
    with pytest.raises(DecodeError, match=why):
        unpack(data)


@SETTINGS
@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_but_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        unpack(data)


@SETTINGS
@given(arrays, st.data())
def test_truncated_array_payloads_raise_decode_error(arr: np.ndarray[Any, Any], data: Any) -> None:
    wire = pack(arr)
    cut = data.draw(st.integers(0, len(wire) - 1))
    with pytest.raises(DecodeError):
        unpack(wire[:cut])


def test_accepts_any_buffer() -> None:
    wire = pack({"a": np.arange(3)})
    for buf in (bytearray(wire), memoryview(wire)):
        assert_same_array(unpack(buf)["a"], np.arange(3))
