"""What each inner operator does with one step's input batches: map, filter, flat_map,
key_by, window and join.  Pure functions of the input and the operator's state, so that a
restart from a checkpoint replays to the same batches.

A user function that raises on a record drops that record (counted as ``fn_errors``, the
first few logged with the record): one bad record does not stop a stream.
"""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from compute.stream.aggregates import make_aggregate
from compute.stream.batch import END_OF_TIME, Batch, Output, Record
from compute.stream.columns import Column, Columns, as_list, column, concat, take
from compute.stream.errors import GraphError
from compute.stream.graph import (
    FilterOp,
    FlatMapOp,
    JoinOp,
    KeyByOp,
    MapOp,
    WindowOp,
    import_function,
)
from compute.stream.join import WindowJoin
from compute.stream.windows import WindowSpec, WindowState
from icn.problems import Problem

log = logging.getLogger(__name__)
LOGGED_ERRORS = 5


def load_fn(ref: str, where: str) -> Callable[..., Any]:
    """The callable ``module:function``; GraphError naming ``where`` (``op.fn``) when it is not
    one.  (A graph file's functions are checked at their lines before it runs:
    :meth:`Graph.check_functions`.)"""
    try:
        return import_function(ref)
    except ValueError as exc:
        raise GraphError(where, [Problem((), str(exc), file=where)]) from None


def partition_of(key: Any, partitions: int) -> int:
    """Which partition a key goes to: the same in every process and run (not ``hash()``,
    which is salted per process for strings)."""
    if type(key) is int:
        return key % partitions
    if type(key) is str:
        return zlib.crc32(key.encode()) % partitions
    return zlib.crc32(msgpack.packb(key)) % partitions


MAX_PARTITION_CACHE = 65536  # keys whose partition a key_by remembers


def partitions_of(keys: Column, partitions: int, cache: dict[str, int]) -> np.ndarray:
    """``partition_of`` of every key of a column: int64 keys by arithmetic, str keys through
    ``cache`` (key -> partition), others one by one."""
    if isinstance(keys, np.ndarray) and keys.dtype == np.int64:
        return keys % partitions  # numpy's % takes the divisor's sign, as Python's
    items = as_list(keys)
    if set(map(type, items)) == {str}:
        if len(cache) > MAX_PARTITION_CACHE:
            cache.clear()
        for k in dict.fromkeys(items):
            if k not in cache:
                cache[k] = zlib.crc32(k.encode()) % partitions
        return np.array(list(map(cache.__getitem__, items)), dtype=np.int64).reshape(len(items))
    return np.array([partition_of(k, partitions) for k in items], dtype=np.int64)


def join_outputs(parts: list[Output]) -> Output:
    """The outputs of one step's input batches as one: columns when they all are and their
    layouts agree, else records."""
    if all(isinstance(p, Columns) for p in parts) and parts:
        joined = concat(parts)  # type: ignore[arg-type]
        if joined is not None:
            return joined
    out: list[Record] = []
    for p in parts:
        out += p.records() if isinstance(p, Columns) else p
    return out


def as_column(got: Any, n: int) -> Column:
    """A vectorized function's column as one the wire carries: an int64, float64 or bool
    array, else a list; ValueError when it is not ``n`` long."""
    if isinstance(got, np.ndarray):
        if got.ndim != 1 or len(got) != n:
            raise ValueError(f"a column of shape {got.shape} where {n} rows were expected")
        if got.dtype.kind == "f":
            return got.astype(np.float64, copy=False)
        if got.dtype.kind in "iu" and got.dtype != np.uint64:
            return got.astype(np.int64, copy=False)
        if got.dtype.kind == "b":
            return got
        return column(got.tolist())
    if isinstance(got, list | tuple):
        if len(got) != n:
            raise ValueError(f"a column of {len(got)} items where {n} rows were expected")
        return column(list(got))
    raise ValueError(f"a column must be a numpy array or a list, not {type(got).__name__}")


def values_of(
    got: Any, n: int, given: Columns | None = None
) -> tuple[dict[str, Column] | None, Column | None]:
    """A vectorized map's result: a dict of field columns (values become dicts), or one
    column (values are its items).  A column of ``given`` handed back as it is (a field the
    map passes through) is taken as it is: it is already one the wire carries."""
    columns = [] if given is None else [*(given.fields or {}).values(), given.value]
    same = {id(c) for c in columns if c is not None}
    if isinstance(got, dict):
        fields = {}
        for name, col in got.items():
            if not isinstance(name, str):
                raise ValueError(f"field name {name!r} is not a str")
            fields[name] = col if id(col) in same and len(col) == n else as_column(col, n)
        return fields, None
    return None, got if id(got) in same and len(got) == n else as_column(got, n)


def hashable(key: Any) -> Any:
    """msgpack gives tuples back as lists; a key must hash."""
    return tuple(hashable(k) for k in key) if type(key) is list else key


WINDOW_COUNTERS = ("late_dropped", "late_fired", "state_full")


def _copy_counters(source: Counter[str], into: Counter[str]) -> None:
    """A window's drop counters, as the instance's (late records are dropped, not errors)."""
    for name in WINDOW_COUNTERS:
        if source[name]:
            into[name] = source[name]


class Step:
    """An operator between an instance's input batches and its output records."""

    def __init__(self, name: str, counters: Counter[str]) -> None:
        self.name = name
        self.counters = counters
        self._errors_logged = 0

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> Output:
        """The output records of one step: ``batches`` in reading order, ``watermark`` the
        smallest of the inputs', ``ended`` once every input has ended."""
        raise NotImplementedError

    def snapshot(self) -> Any:
        return None

    def restore(self, snap: Any) -> None:
        return None

    def _failed(self, record: Record, exc: Exception) -> None:
        self.counters["fn_errors"] += 1
        if self._errors_logged < LOGGED_ERRORS:
            self._errors_logged += 1
            log.warning("%s: dropped record %.200r: %r", self.name, record, exc)


class MapStep(Step):
    """map, filter and flat_map: ``fn`` of each record's value, or with ``vectorized`` of a
    whole batch's :class:`~compute.stream.columns.Columns`: map returns the new values' columns
    (a dict of field columns, or one column), filter a bool mask, flat_map ``(rows, values)``:
    the input row of each output record (its t and key) and the values' columns.  A
    vectorized fn that raises or returns the wrong shape drops its batch (``fn_errors`` by
    records)."""

    def __init__(self, op: MapOp | FilterOp | FlatMapOp, counters: Counter[str]) -> None:
        super().__init__(op.name, counters)
        self.fn = load_fn(op.fn, f"{op.name}.fn")
        self.kind = op.type
        self.vectorized = op.vectorized

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> Output:
        if self.vectorized:
            return join_outputs([self._columns(b.columns) for b in batches])
        fn, out = self.fn, []
        for batch in batches:
            if self.kind == "map":
                for rec in batch.records:
                    try:
                        out.append([rec[0], rec[1], fn(rec[2])])
                    except Exception as exc:
                        self._failed(rec, exc)
            elif self.kind == "filter":
                for rec in batch.records:
                    try:
                        if fn(rec[2]):
                            out.append(rec)
                    except Exception as exc:
                        self._failed(rec, exc)
            else:
                for rec in batch.records:
                    try:
                        out += [[rec[0], rec[1], v] for v in fn(rec[2])]
                    except Exception as exc:
                        self._failed(rec, exc)
        return out

    def _columns(self, cols: Columns) -> Output:
        n = len(cols)
        if not n:
            return cols
        try:
            got = self.fn(cols)
            if self.kind == "map":
                fields, value = values_of(got, n, cols)
                return Columns(cols.t, cols.key, fields, value)
            if self.kind == "filter":
                mask = np.asarray(got)
                if mask.dtype != np.bool_ or mask.shape != (n,):
                    raise ValueError(
                        f"a filter returns a bool array of {n} rows, not {mask.dtype} {mask.shape}"
                    )
                return cols.take(np.flatnonzero(mask))
            rows, got_values = got
            rows = np.asarray(rows, dtype=np.int64)
            if rows.ndim != 1 or (len(rows) and (rows.min() < 0 or rows.max() >= n)):
                raise ValueError(f"flat_map rows must be input rows 0..{n - 1}")
            fields, value = values_of(got_values, len(rows))
            key = None if cols.key is None else take(cols.key, rows)
            return Columns(cols.t[rows], key, fields, value)
        except Exception as exc:
            self.counters["fn_errors"] += n
            if self._errors_logged < LOGGED_ERRORS:
                self._errors_logged += 1
                log.warning("%s: dropped a batch of %d records: %r", self.name, n, exc)
            return []


class KeyByStep(Step):
    def __init__(self, op: KeyByOp, partition: int, partitions: int, counters: Counter[str]):
        super().__init__(op.name, counters)
        self.field = op.field
        self.fn = load_fn(op.fn, f"{op.name}.fn") if op.fn else None
        self.partition = partition
        self.partitions = partitions
        self._cache: dict[str, int] = {}

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> Output:
        return join_outputs([self._one(b) for b in batches])

    def _one(self, batch: Batch) -> Output:
        field = self.field
        if self.fn is None and field is not None:
            cols = batch.columns
            if not len(cols):
                return cols
            if cols.fields is not None and field in cols.fields:
                keyed = cols.with_key(cols.fields[field])
                if self.partitions == 1:
                    return keyed
                parts = partitions_of(keyed.fields[field], self.partitions, self._cache)  # type: ignore[index]
                return keyed.take(np.flatnonzero(parts == self.partition))
        out = []
        mine, n, fn = self.partition, self.partitions, self.fn
        for rec in batch.records:
            try:
                key = rec[2][field] if fn is None else fn(rec[2])
            except Exception as exc:
                self._failed(rec, exc)
                continue
            if n == 1 or partition_of(key, n) == mine:
                out.append([rec[0], key, rec[2]])
        return out


class WindowStep(Step):
    def __init__(self, op: WindowOp, counters: Counter[str]) -> None:
        super().__init__(op.name, counters)
        size, slide = op.size_slide_ms()
        self.spec = WindowSpec(size, slide, round(op.allowed_lateness * 1000))
        reduce = load_fn(op.reduce, f"{op.name}.reduce") if op.reduce else None
        self.aggregate = make_aggregate(op.aggregate, field=op.field, reduce=reduce)
        self.aggregate_field, self.kind = op.field, op.aggregate
        self.state = WindowState(self.spec, self.aggregate)

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> list[Record]:
        state = self.state
        out: list[Any] = []
        for batch in batches:
            if self._add_columns(batch):
                continue
            for rec in batch.records:
                try:
                    out += state.add(hashable(rec[1]), rec[0], rec[2])
                except Exception as exc:
                    self._failed(rec, exc)
        out += state.flush() if ended or watermark >= END_OF_TIME else state.advance(watermark)
        _copy_counters(state.counters, self.counters)
        return [list(o) for o in out]

    def _add_columns(self, batch: Batch) -> bool:
        """The batch folded as columns (True), where its layout allows."""
        cols = batch.columns
        field = self.aggregate_field
        if field is None:
            values = cols.value
        elif cols.fields is None or field not in cols.fields:
            return False  # per record: each record without the field is counted
        else:
            values = cols.fields[field]
        if values is None and self.kind != "count":
            return False
        return self.state.add_columns(cols.key, cols.t, values)

    def snapshot(self) -> Any:
        return self.state.snapshot()

    def restore(self, snap: Any) -> None:
        self.state = WindowState.restore(self.spec, self.aggregate, snap)


class JoinStep(Step):
    def __init__(self, op: JoinOp, n_left: int, counters: Counter[str]) -> None:
        super().__init__(op.name, counters)
        size, slide = op.size_slide_ms()
        self.spec = WindowSpec(size, slide, 0)
        self.n_left = n_left  # the first n_left input streams are the left side
        self.state = WindowJoin(self.spec)

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> list[Record]:
        state = self.state
        for i, batch in enumerate(batches):
            add = state.add_left if i < self.n_left else state.add_right
            for rec in batch.records:
                add(hashable(rec[1]), rec[0], rec[2])
        out = state.flush() if ended or watermark >= END_OF_TIME else state.advance(watermark)
        _copy_counters(state.counters, self.counters)
        return [list(o) for o in out]

    def snapshot(self) -> Any:
        return self.state.snapshot()

    def restore(self, snap: Any) -> None:
        self.state = WindowJoin.restore(self.spec, snap)
