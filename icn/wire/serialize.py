"""Application values on the wire: function arguments and results, stream records.

msgpack carries the values.  numpy arrays travel as one msgpack extension each (dtype, shape and
the raw C-order bytes), so a gradient chunk of a million floats costs one memory copy, not a
million encodings.  What a caller can rely on:

- Supported: None, bool, int (64-bit range), float, str, bytes/bytearray/memoryview (back as
  bytes), list, tuple, dict, numpy arrays and numpy scalars.  Anything else raises EncodeError.
- Tuples come back as lists (msgpack has one array type), subclasses of the builtins as the
  builtin (an IntEnum as its int, a str-valued Enum as its str).
- A numpy scalar comes back as the same numpy type (``np.float32(1.5)`` stays ``np.float32``).
  That holds for ``np.float64`` too, though it subclasses ``float``: every numpy value keeps its
  dtype, with no exception to remember.
- A decoded array is C-contiguous and **read-only**: it is a view over the bytes msgpack hands
  the extension hook, not a copy.  Call ``.copy()`` for a writable one.  Object and structured
  dtypes are refused (send each field of a structured array as its own array).
- Map keys must be hashable once decoded: str, bytes, int, float, bool or None.  A tuple key
  comes back as a list and is refused by ``unpack`` with DecodeError.
- No size limit but the input's: ``msgpack.unpackb`` bounds every length by the size of the
  input it is given, so a 64 MiB bytes value or array decodes, and a forged length cannot make
  it allocate more than was received.
"""

from __future__ import annotations

import math
import struct
import sys
from typing import TYPE_CHECKING, Any

import msgpack

if TYPE_CHECKING:
    import numpy.typing as npt

from icn.errors import DecodeError, EncodeError
from icn.wire.tlv import Buffer

EXT_NDARRAY = 1
EXT_NPSCALAR = 2

# Extension payload: u16 header length, msgpack [dtype string, shape], zero padding, raw bytes.
# The raw bytes start at a multiple of 16 because CPython keeps the data of a bytes object
# 16-aligned, so the decoded array is aligned for every dtype numpy has.
_HLEN = struct.Struct(">H")
_ALIGN = 16

_SUPPORTED = "None, bool, int, float, str, bytes, list, tuple, dict, numpy arrays and scalars"


def pack(obj: Any) -> bytes:
    """Encode ``obj`` (see the module docstring for what is supported); EncodeError otherwise."""
    try:
        data: bytes = msgpack.packb(obj, default=_default, strict_types=True, use_bin_type=True)
    except EncodeError:
        raise
    except (ValueError, TypeError, OverflowError) as exc:
        raise EncodeError(f"cannot serialize value: {exc}") from None
    return data


def unpack(data: Buffer) -> Any:
    """Decode one value produced by :func:`pack`; DecodeError on anything else."""
    try:
        return msgpack.unpackb(data, ext_hook=_ext_hook, strict_map_key=False, raw=False)
    except DecodeError:
        raise
    except TypeError as exc:
        # the one TypeError msgpack lets through: a list or dict used as a map key
        raise DecodeError(f"not a serialized value: map key is {exc}") from None
    except (ValueError, msgpack.UnpackException) as exc:
        raise DecodeError(f"not a serialized value: {type(exc).__name__} {exc}".rstrip()) from None


def _default(obj: Any) -> Any:
    """Called by msgpack for everything it does not pack itself (strict_types: subclasses too)."""
    # numpy is imported where it is used: a value can only be a numpy one if numpy is loaded,
    # and a process that never touches numpy (a forwarder, a named-function call) saves ~70 ms
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(obj, np.ndarray):
            if isinstance(obj, np.ma.MaskedArray):
                raise EncodeError("cannot serialize a numpy masked array: its mask would be lost")
            return msgpack.ExtType(EXT_NDARRAY, _array_payload(np.asarray(obj)))
        if isinstance(obj, np.generic):
            return msgpack.ExtType(EXT_NPSCALAR, _array_payload(np.asarray(obj)))
    if isinstance(obj, tuple | list):
        return list(obj)
    if isinstance(obj, dict):
        return dict(obj)
    if isinstance(obj, str):
        # str(obj) would give "Color.RED" for a (str, Enum) member; this gives its value
        return str.__str__(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, bytes):
        return bytes(obj)
    kind = type(obj)
    raise EncodeError(f"cannot serialize a {kind.__module__}.{kind.__qualname__}: {_SUPPORTED}")


def _array_payload(arr: npt.NDArray[Any]) -> bytes:
    import numpy as np

    dtype = arr.dtype
    if dtype.hasobject or dtype.fields is not None:
        raise EncodeError(
            f"cannot serialize a numpy array of dtype {dtype}: only plain (non-object, "
            "non-structured) dtypes travel as raw bytes"
        )
    if not arr.flags.c_contiguous:
        # not np.ascontiguousarray: it turns a 0-d array into a 1-d one
        arr = arr.copy(order="C")
    header = msgpack.packb([dtype.str, list(arr.shape)])
    start = _raw_start(len(header))
    # a uint8 view reaches the raw bytes of every plain dtype, datetime64 included, which the
    # buffer protocol does not export
    raw = arr.reshape(-1).view(np.uint8).data
    pad = bytes(start - _HLEN.size - len(header))
    return b"".join((_HLEN.pack(len(header)), header, pad, raw))


def _raw_start(header_len: int) -> int:
    return -(-(_HLEN.size + header_len) // _ALIGN) * _ALIGN


def _ext_hook(code: int, payload: bytes) -> Any:
    if code == EXT_NDARRAY:
        return _array_from(payload)
    if code == EXT_NPSCALAR:
        arr = _array_from(payload)
        if arr.ndim != 0:
            raise DecodeError(f"numpy scalar extension holds an array of shape {arr.shape}")
        return arr[()]
    raise DecodeError(f"unknown msgpack extension type {code}")


def _array_from(payload: bytes) -> npt.NDArray[Any]:
    import numpy as np

    if len(payload) < _HLEN.size:
        raise DecodeError("numpy extension shorter than its header length")
    (hlen,) = _HLEN.unpack_from(payload)
    start = _raw_start(hlen)
    if len(payload) < start:
        raise DecodeError("numpy extension shorter than its header")
    try:
        header = msgpack.unpackb(payload[_HLEN.size : _HLEN.size + hlen])
        descr, shape = header
        dtype = np.dtype(descr) if isinstance(descr, str) else None
    except (ValueError, TypeError, msgpack.UnpackException):
        raise DecodeError("numpy extension header is not [dtype, shape]") from None
    if dtype is None or dtype.hasobject or dtype.fields is not None or dtype.subdtype:
        raise DecodeError(f"numpy extension has an unsupported dtype {descr!r}")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise DecodeError(f"numpy extension has a bad shape {shape!r}")
    raw = memoryview(payload)[start:]
    expect = math.prod(shape) * dtype.itemsize
    if len(raw) != expect:
        raise DecodeError(
            f"numpy extension of dtype {dtype} and shape {tuple(shape)} needs {expect} bytes, "
            f"has {len(raw)}"
        )
    if expect == 0:
        arr = np.empty(tuple(shape), dtype)
        arr.flags.writeable = False
        return arr
    return np.frombuffer(raw, dtype).reshape(tuple(shape))
