"""What each inner operator does with one step's input batches: map, filter, flat_map,
key_by, window and join.  Pure functions of the input and the operator's state, so that a
restart from a checkpoint replays to the same batches.

A user function that raises on a record drops that record (counted as ``fn_errors``, the
first few logged with the record): one bad record does not stop a stream.
"""

from __future__ import annotations

import importlib
import logging
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgpack

from compute.stream.aggregates import make_aggregate
from compute.stream.batch import END_OF_TIME, Batch, Record
from compute.stream.errors import GraphError
from compute.stream.graph import FilterOp, FlatMapOp, JoinOp, KeyByOp, MapOp, WindowOp
from compute.stream.join import WindowJoin
from compute.stream.windows import WindowSpec, WindowState

log = logging.getLogger(__name__)
LOGGED_ERRORS = 5


def load_fn(ref: str, where: str) -> Callable[..., Any]:
    """The callable ``module:function``; GraphError naming ``where`` when it is not one."""
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise GraphError(where, [f"cannot import {module_name!r} for {ref}: {exc}"]) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise GraphError(where, [f"{module_name} has no function {attr!r} (from {ref})"])
    return fn  # type: ignore[no-any-return]


def partition_of(key: Any, partitions: int) -> int:
    """Which partition a key goes to: the same in every process and run (not ``hash()``,
    which is salted per process for strings)."""
    if type(key) is int:
        return key % partitions
    if type(key) is str:
        return zlib.crc32(key.encode()) % partitions
    return zlib.crc32(msgpack.packb(key)) % partitions


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

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> list[Record]:
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
    def __init__(self, op: MapOp | FilterOp | FlatMapOp, counters: Counter[str]) -> None:
        super().__init__(op.name, counters)
        self.fn = load_fn(op.fn, f"{op.name}.fn")
        self.kind = op.type

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> list[Record]:
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


class KeyByStep(Step):
    def __init__(self, op: KeyByOp, partition: int, partitions: int, counters: Counter[str]):
        super().__init__(op.name, counters)
        self.field = op.field
        self.fn = load_fn(op.fn, f"{op.name}.fn") if op.fn else None
        self.partition = partition
        self.partitions = partitions

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> list[Record]:
        out = []
        mine, n, field, fn = self.partition, self.partitions, self.field, self.fn
        for batch in batches:
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
        self.state = WindowState(self.spec, self.aggregate)

    def run(self, batches: list[Batch], watermark: int, ended: bool) -> list[Record]:
        state = self.state
        out: list[Any] = []
        for batch in batches:
            for rec in batch.records:
                try:
                    out += state.add(hashable(rec[1]), rec[0], rec[2])
                except Exception as exc:
                    self._failed(rec, exc)
        out += state.flush() if ended or watermark >= END_OF_TIME else state.advance(watermark)
        _copy_counters(state.counters, self.counters)
        return [list(o) for o in out]

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
