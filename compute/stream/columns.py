"""Columnar batches: one step's records as columns, and their wire form.

A record is ``[t, key, value]``.  As columns: ``t`` an int64 array; ``key`` one column (None
when every key is None); and the values either as ``fields`` (every value a dict with the same
str keys in the same order: one column per key) or as one ``value`` column.  A column is a
numpy array when every item is a float (float64), an int that fits int64 (int64) or a bool;
otherwise a list of the objects.  ``records()`` gives back equal records with the same types
(a float stays a float, an int an int; a dict's fields in the first record's order), so the
per-record and the columnar paths of an operator see the same data.

On the wire (the content of a batch's Data)::

    u32 little-endian header length | msgpack header | numeric buffers, 8-byte aligned

The header is ``[watermark, end, rows, t, key, fields, value]`` where a numeric column is
``[dtype, offset, nbytes]`` into the buffers and an object column is ``["o", [items]]``
(msgpack packs those lists in C); a key that is one of the fields' columns (after a key_by of
that field) is ``["f", name]``, carried once.  Decoding makes numeric columns views of the
content: no per-record work and no copy (the arrays are read-only).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Union

import msgpack
import numpy as np

from compute.stream.errors import StreamError

Column = Union[np.ndarray, list[Any]]  # noqa: UP007 (a runtime alias)
Record = list[Any]  # [t, key, value]

_DTYPES = {"q": np.dtype(np.int64), "d": np.dtype(np.float64), "?": np.dtype(np.bool_)}
_CODES = {dt: code for code, dt in _DTYPES.items()}
_LEN = struct.Struct("<I")
_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)
_ALIGN = 8


def column(items: list[Any]) -> Column:
    """``items`` as a numpy column when they are all floats, all ints within int64 or all
    bools (by exact type: a bool is not taken for an int), else the list itself."""
    kinds = set(map(type, items))
    if len(kinds) == 1:
        kind = kinds.pop()
        if kind is float:
            return np.array(items, dtype=np.float64)
        if kind is int:
            try:
                return np.array(items, dtype=np.int64)
            except OverflowError:
                return items
        if kind is bool:
            return np.array(items, dtype=np.bool_)
    return items


def as_list(col: Column) -> list[Any]:
    """The column's items as Python objects (numpy scalars become float, int, bool)."""
    if isinstance(col, np.ndarray):
        items: list[Any] = col.tolist()
        return items
    return col


def take(col: Column, rows: np.ndarray) -> Column:
    """The items at ``rows`` (an int index array), in that order."""
    if isinstance(col, np.ndarray):
        picked: np.ndarray = col[rows]
        return picked
    return [col[i] for i in rows.tolist()]


def _same_kind(cols: list[Column]) -> bool:
    arrays = [isinstance(c, np.ndarray) for c in cols]
    if all(arrays):
        return len({c.dtype for c in cols}) == 1  # type: ignore[union-attr]
    return not any(arrays)


def _concat(cols: list[Column]) -> Column:
    if isinstance(cols[0], np.ndarray):
        return np.concatenate(cols)
    return [item for col in cols for item in col]


@dataclass
class Columns:
    """Records as columns (module docstring).  ``fields`` and ``value``: exactly one is set."""

    t: np.ndarray
    key: Column | None
    fields: dict[str, Column] | None
    value: Column | None = None

    def __len__(self) -> int:
        return len(self.t)

    def __getitem__(self, name: str) -> Column:
        """The column of field ``name`` of the values."""
        if self.fields is None:
            raise KeyError(f"{name!r}: these records' values are not dicts with fields")
        try:
            return self.fields[name]
        except KeyError:
            raise KeyError(f"{name!r}: the values have fields {', '.join(self.fields)}") from None

    @classmethod
    def from_records(cls, records: list[Record]) -> Columns:
        n = len(records)
        t = np.array(list(map(_first, records)), dtype=np.int64).reshape(n)
        keys = list(map(_second, records))
        key = None if keys.count(None) == n else column(keys)
        return cls.from_values(t, key, list(map(_third, records)))

    @classmethod
    def from_values(cls, t: np.ndarray, key: Column | None, values: list[Any]) -> Columns:
        """Columns of ``values`` (a record's third item each) with ``t`` and ``key``."""
        names = _field_names(values)
        if names is not None:
            try:  # one C pass per field; a dict without one of them raises
                fields = {name: column(list(map(itemgetter(name), values))) for name in names}
            except KeyError:
                pass
            else:
                return cls(t, key, fields)
        return cls(t, key, None, column(values))

    def records(self) -> list[Record]:
        n = len(self)
        ts = self.t.tolist()
        keys = [None] * n if self.key is None else as_list(self.key)
        if self.fields is None:
            assert self.value is not None
            return [list(r) for r in zip(ts, keys, as_list(self.value), strict=True)]
        names = list(self.fields)
        cols = [as_list(c) for c in self.fields.values()]
        if not cols:
            return [[t, k, {}] for t, k in zip(ts, keys, strict=True)]
        return [
            [t, k, dict(zip(names, row, strict=True))]
            for t, k, row in zip(ts, keys, zip(*cols, strict=True), strict=True)
        ]

    def key_field(self) -> str | None:
        """The field whose column is the key column itself (a key_by of that field), if any:
        it is carried once."""
        if self.key is not None and self.fields is not None:
            for name, col in self.fields.items():
                if col is self.key:
                    return name
        return None

    def take(self, rows: np.ndarray) -> Columns:
        """The rows at ``rows`` (int indices), in that order."""
        fields = None if self.fields is None else {k: take(c, rows) for k, c in self.fields.items()}
        shared = self.key_field()
        if shared is not None:
            assert fields is not None
            key: Column | None = fields[shared]
        else:
            key = None if self.key is None else take(self.key, rows)
        return Columns(
            self.t[rows], key, fields, None if self.value is None else take(self.value, rows)
        )

    def slice(self, a: int, b: int) -> Columns:
        return self.take(np.arange(a, min(b, len(self)), dtype=np.int64))

    def with_key(self, key: Column | None) -> Columns:
        return Columns(self.t, key, self.fields, self.value)


def _field_names(values: list[Any]) -> tuple[str, ...] | None:
    """The first value's keys when every value is a dict with as many keys, all str (the
    caller finds out whether each has them all).  Fields are put back in this order: a
    record whose dict held the same keys in another order comes back in the first's."""
    if not values or set(map(type, values)) != {dict}:
        return None
    names = tuple(values[0])
    if set(map(len, values)) != {len(names)} or not all(type(n) is str for n in names):
        return None
    return names


def concat(parts: list[Columns]) -> Columns | None:
    """One Columns of ``parts`` in order, or None when their layouts differ (then the caller
    joins their records instead)."""
    parts = [p for p in parts if len(p)] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    keyed = [p.key is not None for p in parts]
    if any(keyed) and not all(keyed):
        return None
    if first.fields is not None:
        names = list(first.fields)
        if any(p.fields is None or list(p.fields) != names for p in parts):
            return None
        fields: dict[str, Column] | None = {}
        assert fields is not None
        for name in names:
            cols = [p.fields[name] for p in parts]  # type: ignore[index]
            if not _same_kind(cols):
                return None
            fields[name] = _concat(cols)
        value = None
    else:
        if any(p.value is None for p in parts):
            return None
        vals = [p.value for p in parts]
        if not _same_kind(vals):  # type: ignore[arg-type]
            return None
        fields, value = None, _concat(vals)  # type: ignore[arg-type]
    key = None
    shared = {p.key_field() for p in parts}
    key_name = shared.pop() if len(shared) == 1 else None
    if all(keyed) and key_name is not None:
        assert fields is not None
        key = fields[key_name]
    elif all(keyed):
        keys = [p.key for p in parts]
        if not _same_kind(keys):  # type: ignore[arg-type]
            return None
        key = _concat(keys)  # type: ignore[arg-type]
    return Columns(np.concatenate([p.t for p in parts]), key, fields, value)


# ---- the wire form ------------------------------------------------------------------------------


def _put(col: Column, buffers: list[bytes], offset: list[int]) -> list[Any]:
    if isinstance(col, np.ndarray):
        data = np.ascontiguousarray(col).tobytes()
        at = offset[0]
        pad = -len(data) % _ALIGN
        buffers.append(data + b"\0" * pad if pad else data)
        offset[0] += len(data) + pad
        return [_CODES[col.dtype], at, len(data)]
    return ["o", col]


def _put_key(cols: Columns, buffers: list[bytes], offset: list[int]) -> list[Any] | None:
    if cols.key is None:
        return None
    shared = cols.key_field()
    return ["f", shared] if shared is not None else _put(cols.key, buffers, offset)


def encode_columns(cols: Columns, watermark: int, end: bool) -> bytes:
    buffers: list[bytes] = []
    offset = [0]
    header = [
        watermark,
        end,
        len(cols),
        _put(cols.t, buffers, offset),
        _put_key(cols, buffers, offset),
        None
        if cols.fields is None
        else [[name, _put(c, buffers, offset)] for name, c in cols.fields.items()],
        None if cols.value is None else _put(cols.value, buffers, offset),
    ]
    head = msgpack.packb(header)
    pad = -(_LEN.size + len(head)) % _ALIGN
    return b"".join([_LEN.pack(len(head)), head, b"\0" * pad, *buffers])


def _get(desc: Any, content: Any, base: int, rows: int) -> Column:
    code = desc[0]
    if code == "o":
        items = desc[1]
        if not isinstance(items, list) or len(items) != rows:
            raise ValueError("an object column of the wrong length")
        return items
    dtype = _DTYPES[code]
    at, nbytes = int(desc[1]), int(desc[2])
    if nbytes != rows * dtype.itemsize or base + at + nbytes > len(content) or at < 0:
        raise ValueError("a column past the content's end")
    return np.frombuffer(content, dtype=dtype, count=rows, offset=base + at)


def decode_columns(content: Any) -> tuple[int, bool, Columns]:
    """(watermark, end, Columns) from ``encode_columns``' bytes; StreamError for content
    that is not a batch."""
    try:
        (size,) = _LEN.unpack_from(content, 0)
        head_end = _LEN.size + size
        wm, end, rows, t, key, fields, value = msgpack.unpackb(
            content[_LEN.size : head_end], strict_map_key=False
        )
        if not isinstance(wm, int) or not isinstance(rows, int) or rows < 0:
            raise TypeError("bad header fields")
        if (fields is None) == (value is None):
            raise TypeError("fields and value both given or both missing")
        base = head_end + (-head_end % _ALIGN)
        ts = _get(t, content, base, rows)
        if not isinstance(ts, np.ndarray) or ts.dtype != np.int64:
            raise TypeError("event times are not int64")
        got = (
            None
            if fields is None
            else {str(name): _get(desc, content, base, rows) for name, desc in fields}
        )
        if key is not None and key[0] == "f":  # the key is that field's column
            if got is None or key[1] not in got:
                raise ValueError(f"the key names a field {key[1]!r} that is not there")
            keys: Column | None = got[key[1]]
        else:
            keys = None if key is None else _get(key, content, base, rows)
        cols = Columns(ts, keys, got, None if value is None else _get(value, content, base, rows))
    except Exception as exc:
        raise StreamError(f"a batch that does not decode ({exc!r})") from None
    return wm, bool(end), cols
