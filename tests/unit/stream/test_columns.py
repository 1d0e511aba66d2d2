"""Columnar batches: records to columns and back, the wire form and what it refuses, concat,
the vectorized map/filter/flat_map against their per-record forms, and key partitioning of a
whole column against ``partition_of`` per key.  Equality is exact: types (a bool is not an
int, a float not an int) and float bits (tests/unit/stream/exact.py).  (No I/O.)"""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compute.stream.batch import Batch, decode_batch, encode_batches, output_records
from compute.stream.columns import Columns, concat, decode_columns, encode_columns
from compute.stream.errors import StreamError
from compute.stream.graph import FilterOp, FlatMapOp, KeyByOp, MapOp
from compute.stream.operators import (
    MAX_PARTITION_CACHE,
    KeyByStep,
    MapStep,
    join_outputs,
    partition_of,
    partitions_of,
)
from tests.unit.stream.exact import assert_same

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Record = list[Any]  # [t, key, value]
NAN = float("nan")
INT64 = (-(2**63), 2**63 - 1)

# ---- records ----------------------------------------------------------------------------------

floats = st.floats() | st.sampled_from([-0.0, 0.0, NAN, -NAN, float("inf"), 5e-324, 1e308])
int64s = st.integers(*INT64) | st.sampled_from([0, 1, -1, *INT64])
wire_ints = st.integers(-(2**63), 2**64 - 1)  # what msgpack packs: beyond int64 up to uint64
# each yields one Python type (or a mix, for list columns)
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "float": floats,
    "int64": int64s,
    "beyond_int64": st.integers(2**63, 2**64 - 1),
    "bool": st.booleans(),
    "str": st.text(max_size=5),
    "none": st.none(),
    "bytes": st.binary(max_size=4),
    "int_bool": st.integers(-2, 2) | st.booleans(),  # 1 and True kept apart
    "int_float": st.integers(-2, 2) | st.sampled_from([0.0, 1.0, -0.0]),  # 1 and 1.0 too
}


def nested(wire: bool) -> st.SearchStrategy[Any]:
    """Lists and dicts of scalars, tuples too unless for the wire (msgpack lists them)."""
    scalar = st.one_of(*SCALARS.values()) if not wire else floats | wire_ints | st.text(max_size=3)

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        shapes = st.lists(inner, max_size=3) | st.dictionaries(
            st.text(max_size=2), inner, max_size=3
        )
        return shapes if wire else shapes | st.tuples(inner, inner)

    return st.recursive(scalar, extend, max_leaves=5)


def kinds(wire: bool) -> st.SearchStrategy[st.SearchStrategy[Any]]:
    """A strategy of one column's items: one scalar kind, or nested values; ints past what
    msgpack packs unless for the wire."""
    mixed = [nested(wire), wire_ints]
    if not wire:
        mixed.append(st.integers(2**64, 2**90) | st.integers(-(2**90), -(2**63) - 1))
    return st.sampled_from([*(SCALARS[n] for n in sorted(SCALARS)), *mixed])


@st.composite
def key_columns(draw: st.DrawFn, n: int, wire: bool) -> list[Any]:
    hashable: st.SearchStrategy[Any] = st.none() | st.text(max_size=3) | int64s | st.booleans()
    hashable |= st.floats()
    if not wire:
        hashable = hashable | st.integers() | st.tuples(st.text(max_size=2), int64s)
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return [None] * n
    if choice == 1:
        one = draw(kinds(wire))  # numpy or list, as the items make it
        return [draw(one) for _ in range(n)]
    return [draw(hashable) for _ in range(n)]


@st.composite
def value_columns(draw: st.DrawFn, n: int, wire: bool) -> list[Any]:
    """``n`` values: dicts of one shape (field columns), or not (one value column)."""
    shape = draw(st.integers(0, 5))
    if shape <= 2:  # same str fields in the same order: a column each
        names = draw(st.lists(st.text(max_size=3), unique=True, max_size=3))
        columns = {name: draw(kinds(wire)) for name in names}
        return [{name: draw(items) for name, items in columns.items()} for _ in range(n)]
    if shape == 3:  # dicts of different shapes, or non-str keys
        keys = st.text(max_size=2) | st.integers(-3, 3)
        dicts = st.dictionaries(keys, st.integers(0, 3) | st.text(max_size=2), max_size=3)
        return [draw(dicts) for _ in range(n)]
    items = draw(kinds(wire))  # values that are not dicts
    return [draw(items) for _ in range(n)]


@st.composite
def record_lists(draw: st.DrawFn, wire: bool = False) -> list[Record]:
    n = draw(st.integers(0, 8))
    ts = [draw(st.integers(*INT64)) for _ in range(n)]
    keys = draw(key_columns(n, wire))
    values = draw(value_columns(n, wire))
    return [[t, k, v] for t, k, v in zip(ts, keys, values, strict=True)]


@SETTINGS
@given(record_lists())
def test_records_to_columns_and_back_are_the_same_records(records: list[Record]) -> None:
    cols = Columns.from_records(records)
    assert len(cols) == len(records)
    for col in [cols.key, cols.value, *(cols.fields or {}).values()]:
        if isinstance(col, np.ndarray):  # only where every item has the array's Python type
            assert col.dtype in (np.int64, np.float64, np.bool_)
            kind = {"i": int, "f": float, "b": bool}[col.dtype.kind]
            assert all(type(r) is kind for r in col.tolist())
        elif col is not None:  # a list only where no array holds the items
            types = set(map(type, col))
            in_int64 = types == {int} and all(INT64[0] <= x <= INT64[1] for x in col)
            assert types not in ({float}, {bool}) and not in_int64
    assert_same(cols.records(), records, "round trip")
    rows = np.arange(len(records))[::-1].copy()
    assert_same(cols.take(rows).records(), records[::-1], "take")
    assert_same(cols.slice(1, 3).records(), records[1:3], "slice")


def test_columns_of_each_kind() -> None:
    records = [
        [1, "a", {"f": 1.5, "i": 2**62, "b": True, "o": 2**63, "m": 1, "n": 1}],
        [2, "b", {"f": -0.0, "i": -(2**63), "b": False, "o": 1, "m": True, "n": 1.0}],
    ]
    cols = Columns.from_records(records)
    assert cols.fields is not None
    assert [type(c).__name__ for c in cols.fields.values()] == ["ndarray"] * 3 + ["list"] * 3
    assert [cols.fields[f].dtype for f in "fib"] == [np.float64, np.int64, np.bool_]  # type: ignore[union-attr]
    assert cols["m"] == [1, True] and cols["n"] == [1, 1.0]
    no_keys = Columns.from_records([[1, None, 5], [2, None, 6]])
    assert no_keys.key is None and no_keys.fields is None
    two_shapes = [[1, "a", {"v": 1}], [2, "b", {}]]
    assert_same(Columns.from_records(two_shapes).records(), two_shapes, "dicts of two shapes")
    with pytest.raises(KeyError, match=r"'x'.*fields f, i, b, o, m"):
        cols["x"]


# ---- the wire form ----------------------------------------------------------------------------


@SETTINGS
@given(record_lists(wire=True), st.integers(*INT64), st.booleans())
def test_encode_decode_gives_the_records_back(
    records: list[Record], watermark: int, end: bool
) -> None:
    cols = Columns.from_records(records)
    content = encode_columns(cols, watermark, end)
    got_watermark, got_end, got = decode_columns(content)
    assert (got_watermark, got_end) == (watermark, end)
    assert_same(got.records(), records, "decoded")
    assert (cols.fields is None) == (got.fields is None)
    pairs = [(cols.t, got.t), (cols.key, got.key), (cols.value, got.value)]
    pairs += zip((cols.fields or {}).values(), (got.fields or {}).values(), strict=True)
    for before, after in pairs:
        assert type(before) is type(after)
        if isinstance(after, np.ndarray):  # a read-only view of the content: no copy
            assert isinstance(before, np.ndarray) and after.dtype == before.dtype
            assert not after.flags.writeable
            assert after.base is not None
    batch = decode_batch(bytearray(content))
    assert (batch.watermark, batch.end, len(batch)) == (watermark, end, len(records))
    assert_same(batch.records, records, "decode_batch")


def decodes_or_refuses(content: bytes) -> Columns | None:
    """The columns, or None for a StreamError; any other exception fails the test.  What
    decodes must give its records."""
    try:
        _, _, cols = decode_columns(content)
    except StreamError:
        return None
    assert len(cols.records()) == len(cols)
    return cols


@settings(SETTINGS, max_examples=300)
@given(st.binary(max_size=200))
def test_garbage_raises_stream_error_only(content: bytes) -> None:
    decodes_or_refuses(content)


descriptors = st.one_of(
    st.tuples(
        st.sampled_from(["q", "d", "?", "x", "o"]), st.integers(-16, 64), st.integers(-8, 64)
    ),
    st.tuples(st.just("o"), st.lists(st.integers(0, 3), max_size=4)),
    st.none(),
    st.integers(-1, 2),
    st.text(max_size=2),
    st.lists(st.integers(*INT64), max_size=1),
)


@settings(SETTINGS, max_examples=300)
@given(
    st.one_of(st.integers(*INT64), st.none(), st.text(max_size=1), st.booleans()),
    st.integers(-2, 5) | st.none() | st.text(max_size=1),
    descriptors,
    descriptors,
    st.none() | st.lists(st.tuples(st.text(max_size=2) | int64s, descriptors), max_size=2),
    descriptors,
    st.binary(max_size=80),
)
def test_made_up_headers_raise_stream_error_only(
    watermark: Any, rows: Any, t: Any, key: Any, fields: Any, value: Any, body: bytes
) -> None:
    """Well-formed msgpack with wrong fields: types, codes, offsets, lengths."""
    head = msgpack.packb([watermark, True, rows, t, key, fields, value])
    pad = -(4 + len(head)) % 8
    decodes_or_refuses(struct.pack("<I", len(head)) + head + b"\0" * pad + body)


def lie(data: st.DataObject, desc: Any) -> Any:
    """``desc`` (a column's descriptor) changed in one place, or replaced."""
    if isinstance(desc, list) and desc and data.draw(st.integers(0, 3)):
        desc = list(desc)
        at = data.draw(st.integers(0, len(desc) - 1))
        if isinstance(desc[at], int):
            desc[at] += data.draw(st.sampled_from([-8, -1, 1, 8]))
        elif isinstance(desc[at], list):  # an object column's items: one more or one less
            desc[at] = desc[at][1:] if desc[at] and data.draw(st.booleans()) else [*desc[at], 0]
        else:
            desc[at] = data.draw(st.sampled_from(["q", "d", "?", "o", "x"]))
        return desc
    return data.draw(descriptors)


@settings(SETTINGS, max_examples=200)
@given(record_lists(wire=True), st.data())
def test_headers_that_lie_raise_stream_error_only(
    records: list[Record], data: st.DataObject
) -> None:
    """A real batch's header with one lie: its row count, a column's code, offset, byte
    count or items, a column missing or added."""
    content = encode_columns(Columns.from_records(records), 7, False)
    (size,) = struct.unpack_from("<I", content)
    head = msgpack.unpackb(content[4 : 4 + size], strict_map_key=False)
    body = content[4 + size + (-(4 + size) % 8) :]
    which = data.draw(st.sampled_from([2, 3, 4, 5, 6]))
    if which == 2:
        head[2] += data.draw(st.sampled_from([-1, 1, 2]))
    elif which == 5 and head[5]:
        fields = [list(f) for f in head[5]]
        field = data.draw(st.sampled_from(fields))
        field[1] = lie(data, field[1])
        head[5] = fields
    else:
        head[which] = lie(data, head[which])
    head_bytes = msgpack.packb(head)
    pad = -(4 + len(head_bytes)) % 8
    decodes_or_refuses(struct.pack("<I", len(head_bytes)) + head_bytes + b"\0" * pad + body)


@SETTINGS
@given(record_lists(wire=True), st.data())
def test_truncated_or_flipped_encodings_raise_stream_error_only(
    records: list[Record], data: st.DataObject
) -> None:
    content = encode_columns(Columns.from_records(records), 7, False)
    cut = data.draw(st.integers(0, len(content) - 1))
    cols = decodes_or_refuses(content[:cut])
    if cols is not None:  # only padding was cut
        assert_same(cols.records(), records, "truncated")
        assert content[cut:].strip(b"\0") == b""
    flipped = bytearray(content)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(content) * 8 - 1))
        flipped[at // 8] ^= 1 << (at % 8)
    decodes_or_refuses(bytes(flipped))


@SETTINGS
@given(record_lists(wire=True), st.integers(60, 300), st.booleans())
def test_a_batch_over_the_limit_is_cut_in_order(
    records: list[Record], limit: int, end: bool
) -> None:
    """Each piece within ``limit`` (or one record), the records in order, and only the last
    piece with the step's watermark and end."""
    try:
        pieces = encode_batches(records, 50, end, limit=limit, previous_watermark=40)
    except StreamError as exc:
        assert "exceeds batch_bytes" in str(exc)
        return
    got = [decode_batch(p) for p in pieces]
    assert all(len(p) <= limit or len(b) == 1 for p, b in zip(pieces, got, strict=True))
    assert_same([r for b in got for r in b.records], records, "pieces")
    assert [(b.watermark, b.end) for b in got] == [(40, False)] * (len(got) - 1) + [(50, end)]


# ---- concat -----------------------------------------------------------------------------------


@settings(SETTINGS, max_examples=100)
@given(st.lists(record_lists(), max_size=4))
def test_concat_is_the_records_in_order_or_none(parts: list[list[Record]]) -> None:
    cols = [Columns.from_records(p) for p in parts]
    joined = [r for p in parts for r in p]
    if cols:
        got = concat(cols)
        if got is not None:
            assert_same(got.records(), joined, "concat")
    assert_same(output_records(join_outputs(list(cols))), joined, "join_outputs")


@SETTINGS
@given(st.data(), st.lists(st.integers(0, 5), min_size=1, max_size=4))
def test_concat_of_one_layout_is_columns(data: st.DataObject, sizes: list[int]) -> None:
    """Parts whose columns have one kind each (the same field names, dtypes and keys)."""
    layout = {name: data.draw(st.sampled_from(["float", "int64", "str", "bool"])) for name in "ab"}
    keyed = data.draw(st.booleans())

    def record() -> Record:
        key = data.draw(st.text(max_size=2)) if keyed else None
        return [data.draw(int64s), key, {k: data.draw(SCALARS[v]) for k, v in layout.items()}]

    parts = [[record() for _ in range(size)] for size in sizes]
    got = concat([Columns.from_records(p) for p in parts])
    assert got is not None
    assert_same(got.records(), [r for p in parts for r in p], "concat")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ([[1, None, {"v": 1}]], [[2, None, {"v": 1.5}]]),  # int64 and float64
        ([[1, None, {"v": 1}]], [[2, None, {"v": 2**64 - 1}]]),  # int64 and a list
        ([[1, None, {"v": 1}]], [[2, "k", {"v": 2}]]),  # no key column and one
        ([[1, 1, {"v": 1}]], [[2, "k", {"v": 2}]]),  # int64 keys and str keys
        ([[1, None, {"v": 1}]], [[2, None, {"w": 2}]]),  # other field names
        ([[1, None, {"v": 1, "w": 1}]], [[2, None, {"w": 2, "v": 1}]]),  # other order
        ([[1, None, {"v": 1}]], [[2, None, 5]]),  # fields and a value column
        ([[1, None, 5]], [[2, None, 5.0]]),  # value columns of two dtypes
    ],
)
def test_concat_of_other_layouts_is_none_and_join_outputs_gives_records(
    first: list[Record], second: list[Record]
) -> None:
    parts = [Columns.from_records(first), Columns.from_records(second)]
    assert concat(parts) is None
    assert_same(join_outputs(list(parts)), first + second, "join_outputs")
    empty = Columns.from_records([])  # an empty part takes no part in the layout
    assert_same(concat([empty, parts[0], empty]).records(), first, "empty parts")  # type: ignore[union-attr]


# ---- vectorized map, filter and flat_map ------------------------------------------------------


def _objects(col: Any) -> np.ndarray:
    """A column as an array; a list as Python objects, so that + and * are Python's."""
    return col if isinstance(col, np.ndarray) else np.array(col, dtype=object)


def scale(value: dict[str, Any]) -> dict[str, Any]:
    return {"v": value["v"] * 2, "n": value["n"]}


def scale_columns(cols: Columns) -> dict[str, Any]:
    with np.errstate(over="ignore"):  # inf, as Python's float *
        return {"v": _objects(cols["v"]) * 2, "n": cols["n"]}


def plus_one(value: dict[str, Any]) -> Any:
    return value["v"] + 1


def plus_one_columns(cols: Columns) -> Any:
    with np.errstate(over="ignore"):
        return _objects(cols["v"]) + 1


def positive(value: dict[str, Any]) -> bool:
    return bool(value["v"] > 0)


def positive_columns(cols: Columns) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(_objects(cols["v"]) > 0, dtype=bool)


def both_signs(value: dict[str, Any]) -> list[dict[str, Any]]:
    v = value["v"]
    return [{"v": v}, {"v": -v}] if v > 0 else []


def both_signs_columns(cols: Columns) -> tuple[np.ndarray, dict[str, Any]]:
    v = _objects(cols["v"])
    with np.errstate(invalid="ignore"):  # nan > 0 is False, as in Python
        keep = np.flatnonzero(np.asarray(v > 0, dtype=bool))
    pairs = np.stack([v[keep], -v[keep]], axis=1).reshape(-1)
    return keep.repeat(2), {"v": pairs}


def fails_on_odd_batches(cols: Columns) -> Any:
    if len(cols) % 2:
        raise ValueError("an odd batch")
    return cols["v"]


def too_short(cols: Columns) -> Any:
    return {"v": cols["v"][:-1]}


def ints_not_a_mask(cols: Columns) -> Any:
    return np.ones(len(cols), dtype=np.int64)


def rows_past_the_end(cols: Columns) -> Any:
    return np.array([len(cols)]), {"v": [1]}


def field_not_a_str(cols: Columns) -> Any:
    return {1: cols["v"]}


def first_value(value: dict[str, Any]) -> Any:
    return value["v"]


HERE = "tests.unit.stream.test_columns"
OPS: dict[str, type[MapOp] | type[FilterOp] | type[FlatMapOp]] = {
    "map": MapOp,
    "filter": FilterOp,
    "flat_map": FlatMapOp,
}
PAIRS = [
    ("map", "scale"),
    ("map", "plus_one"),
    ("filter", "positive"),
    ("flat_map", "both_signs"),
]


def map_step(kind: str, fn: str, vectorized: bool) -> MapStep:
    op = OPS[kind](type=kind, name="m", input="src", fn=f"{HERE}:{fn}", vectorized=vectorized)
    return MapStep(op, Counter())


V_KINDS = [
    floats,
    st.integers(-(2**40), 2**40),
    st.integers(-(2**40), 2**40) | floats,  # a list column of ints and floats
    st.integers(2**63, 2**64 - 1) | st.integers(-3, 3),  # ints beyond int64: a list
]


@st.composite
def map_batches(draw: st.DrawFn) -> list[list[Record]]:
    """Batches of values {"v": a number, "n": anything}, one kind of "v" per batch."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        v, n = draw(st.sampled_from(V_KINDS)), draw(kinds(wire=True))
        keys = draw(key_columns(8, wire=True))
        size = draw(st.integers(0, 8))
        out.append([[draw(int64s), keys[i], {"v": draw(v), "n": draw(n)}] for i in range(size)])
    return out


@SETTINGS
@given(map_batches(), st.sampled_from(PAIRS), st.booleans())
def test_vectorized_fns_give_the_per_record_results(
    batches: list[list[Record]], pair: tuple[str, str], wire: bool
) -> None:
    kind, fn = pair
    per_record = map_step(kind, fn, vectorized=False)
    expected = output_records(
        per_record.run([Batch(0, False, records=b) for b in batches], 0, False)
    )
    assert per_record.counters["fn_errors"] == 0
    vectorized = map_step(kind, f"{fn}_columns", vectorized=True)
    inputs = [
        decode_batch(encode_columns(Columns.from_records(b), 0, False))
        if wire
        else Batch(0, False, columns=Columns.from_records(b))
        for b in batches
    ]
    got = vectorized.run(inputs, 0, False)
    assert vectorized.counters["fn_errors"] == 0
    assert_same(output_records(got), expected, f"{kind} {fn}")


@pytest.mark.parametrize(
    ("kind", "fn"),
    [
        ("map", "too_short"),
        ("map", "field_not_a_str"),
        ("filter", "ints_not_a_mask"),
        ("filter", "too_short"),
        ("flat_map", "rows_past_the_end"),
        ("flat_map", "too_short"),  # not a (rows, values) pair
        ("map", "scale_columns"),  # a batch without field "n"
    ],
)
def test_a_vectorized_fn_that_fails_drops_its_batch(kind: str, fn: str) -> None:
    step = map_step(kind, fn, vectorized=True)
    batch = Batch(
        0, False, records=[[1, None, {"v": 1.5}], [2, "k", {"v": 2.5}], [3, None, {"v": 0.5}]]
    )
    assert output_records(step.run([batch, Batch(0, False)], 0, False)) == []
    assert step.counters["fn_errors"] == 3


@SETTINGS
@given(st.lists(st.lists(floats, max_size=5), max_size=5))
def test_a_failed_batch_is_dropped_alone(values_of_batches: list[list[float]]) -> None:
    batches: list[list[Record]] = [
        [[i, "k", {"v": v}] for i, v in enumerate(values)] for values in values_of_batches
    ]
    step = map_step("map", "fails_on_odd_batches", vectorized=True)
    got = step.run([Batch(0, False, records=b) for b in batches], 0, False)
    kept = [[t, k, v["v"]] for b in batches if len(b) % 2 == 0 for t, k, v in b]
    assert_same(output_records(got), kept, "kept batches")
    assert step.counters["fn_errors"] == sum(len(b) for b in batches if len(b) % 2)
    per_record = map_step("map", "first_value", vectorized=False)
    whole = per_record.run([Batch(0, False, records=b) for b in batches], 0, False)
    assert len(output_records(whole)) == sum(map(len, batches))


# ---- partitions -------------------------------------------------------------------------------

mixed_keys = st.one_of(
    st.text(max_size=4),
    st.integers(-(2**63), 2**64 - 1),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.tuples(st.text(max_size=2), st.integers(-5, 5)),
)


@SETTINGS
@given(
    st.integers(1, 256),
    st.lists(
        st.lists(int64s, max_size=12).map(lambda k: np.array(k, dtype=np.int64))
        | st.lists(floats, max_size=12).map(lambda k: np.array(k, dtype=np.float64))
        | st.lists(st.booleans(), max_size=12).map(lambda k: np.array(k, dtype=np.bool_))
        | st.lists(st.text(max_size=4), max_size=12)
        | st.lists(st.sampled_from(["a", "b", "é", ""]), max_size=12)
        | st.lists(mixed_keys, max_size=12),
        min_size=1,
        max_size=3,
    ),
)
def test_partitions_of_a_column_are_partition_of_each_key(
    partitions: int, columns: list[Any]
) -> None:
    cache: dict[str, int] = {}  # one key_by's: shared by its batches
    for keys in columns:
        got = partitions_of(keys, partitions, cache)
        expected = [
            partition_of(k, partitions)
            for k in (keys.tolist() if isinstance(keys, np.ndarray) else keys)
        ]
        assert got.dtype == np.int64 and got.tolist() == expected
        if isinstance(keys, np.ndarray) and keys.dtype == np.int64:  # a view, as decoded
            view = decode_columns(
                encode_columns(Columns(keys, None, None, [None] * len(keys)), 0, False)
            )[2].t
            assert partitions_of(view, partitions, cache).tolist() == expected


def test_a_full_cache_is_emptied_and_the_partitions_stay_right() -> None:
    cache = {f"junk{i}": 0 for i in range(MAX_PARTITION_CACHE + 1)}  # "junk3" is in 4
    keys = ["a", "b", "junk3", "a"]
    assert partitions_of(keys, 7, cache).tolist() == [partition_of(k, 7) for k in keys]
    assert len(cache) == 3


@st.composite
def keyed_batches(draw: st.DrawFn) -> list[list[Record]]:
    """Values {"k": a key, "x": a number}; some batches with records lacking "k"."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        keys = draw(st.sampled_from([int64s, st.text(max_size=3), mixed_keys, st.booleans()]))
        missing = draw(st.integers(0, 4)) == 0
        records = []
        for t in range(draw(st.integers(0, 8))):
            value = {"x": t} if missing and draw(st.booleans()) else {"k": draw(keys), "x": t}
            records.append([t, None, value])
        out.append(records)
    return out


@SETTINGS
@given(keyed_batches(), st.integers(1, 5), st.data(), st.booleans())
def test_key_by_a_field_keeps_this_partitions_records(
    batches: list[list[Record]], partitions: int, data: st.DataObject, wire: bool
) -> None:
    mine = data.draw(st.integers(0, partitions - 1))
    op = KeyByOp(type="key_by", name="k", input="src", field="k")
    step = KeyByStep(op, mine, partitions, Counter())
    inputs = [
        decode_batch(encode_columns(Columns.from_records(b), 0, False))
        if wire
        else Batch(0, False, records=b)
        for b in batches
    ]
    # what the step receives: tuples in keys come back from the wire as lists
    sent = (
        [
            decode_columns(encode_columns(Columns.from_records(b), 0, False))[2].records()
            for b in batches
        ]
        if wire
        else batches
    )
    got = output_records(step.run(inputs, 0, False))
    expected = [
        [t, v["k"], v]
        for b in sent
        for t, _, v in b
        if "k" in v and (partitions == 1 or partition_of(v["k"], partitions) == mine)
    ]
    assert_same(got, expected, "key_by")
    assert step.counters["fn_errors"] == sum("k" not in v for b in batches for _, _, v in b)


def test_a_key_that_is_a_field_column_travels_once() -> None:
    """After a key_by of a field the key column is that field's: encoded as a reference to
    it, decoded as the same column, kept shared by take; a reference to a missing field is
    refused like any bad batch."""

    from compute.stream.columns import _LEN, Columns, decode_columns, encode_columns

    records = [[i, None, {"sensor": f"s{i % 3}", "value": i / 3}] for i in range(40)]
    cols = Columns.from_records(records)
    assert cols.fields is not None
    keyed = cols.with_key(cols.fields["sensor"])
    plain = encode_columns(cols.with_key(list(cols.fields["sensor"])), 7, False)
    shared = encode_columns(keyed, 7, False)
    assert len(shared) < len(plain) - 100  # the 40 keys are not there twice
    _, _, back = decode_columns(shared)
    assert back.fields is not None and back.key is back.fields["sensor"]
    assert back.records() == [[t, v["sensor"], v] for t, _, v in records]
    taken = back.take(np.array([3, 1], dtype=np.int64))
    assert taken.fields is not None and taken.key is taken.fields["sensor"]
    (size,) = _LEN.unpack_from(shared, 0)
    header = msgpack.unpackb(shared[4 : 4 + size])
    header[4] = ["f", "nope"]
    forged = msgpack.packb(header)
    with pytest.raises(StreamError):
        decode_columns(_LEN.pack(len(forged)) + forged + shared[4 + size :])
