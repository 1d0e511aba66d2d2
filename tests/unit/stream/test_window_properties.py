"""A window's three paths give the same bits: a reference folded plainly from the input, the
per-record path (``WindowState.add`` and ``advance``) and the columnar one (``WindowStep`` on
batches of columns, which folds a batch with ``add_columns`` where that is exact and adds per
record where not).  Same outputs in the same order, same types and float bits (-0.0, NaN),
same counters and the same snapshot.  (No I/O.)"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compute.stream.aggregates import AggregateError, make_aggregate
from compute.stream.batch import END_OF_TIME, Batch, decode_batch
from compute.stream.columns import Columns, encode_columns
from compute.stream.graph import WindowOp
from compute.stream.operators import WindowStep
from compute.stream.windows import (
    FOLDED_KINDS,
    MAX_WATERMARK,
    MIN_WATERMARK,
    SAFE_T,
    Out,
    WindowSpec,
    WindowState,
    encode_key,
)
from tests.unit.stream.exact import assert_same
from tests.unit.stream.watermarks import next_watermark, starts_holding

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Record = list[Any]  # [t, key, value]
Step = tuple[list[list[Record]], int]  # one step's batches, then its watermark
NAN = float("nan")

# ---- the input -------------------------------------------------------------------------------

# True == 1 as a dict key: the columnar path must merge them as the per-record dicts do
MIXED_KEYS: list[Any] = ["a", "b", "", 0, 1, -7, 2**40, None, True, "a", "b", 1, None]
KEY_POOLS: list[list[Any]] = [
    MIXED_KEYS,
    [*MIXED_KEYS, ("x", 1)],  # a tuple key: a list after the wire, which add_columns refuses
    [3, -1, 0, 2**40],  # an int64 key column
    ["s", "t", "u"],  # a str key column
    [None],  # no key column
]
FAR_T = [2**62, 2**62 + 1, SAFE_T - 1, -SAFE_T, -SAFE_T + 1, 2**63 - 1, -(2**63)]

plain_floats = st.floats(-1e6, 1e6).map(lambda x: x or 1.0)  # no zero: min and max take them
SPECIAL = [-0.0, 0.0, NAN, -NAN, float("inf"), -float("inf"), 1e308, -1e308, 5e-324, 2.0**53]
special_floats = st.sampled_from(SPECIAL) | st.floats()
small_ints = st.integers(-1000, 1000) | st.integers(-(2**40), 2**40)
INT64_EDGES = [2**61, 2**62 - 1, 2**62, -(2**62), 2**63 - 1, -(2**63)]
int64_edges = st.sampled_from(INT64_EDGES) | st.integers(-(2**63), 2**63 - 1)
beyond_int64 = st.integers(2**63, 2**64 - 1)  # msgpack still packs these (uint64)

VALUE_MODES = {
    "float": plain_floats,
    "special": special_floats,
    "int": small_ints,
    "int64_edges": int64_edges | small_ints,
    "beyond": beyond_int64 | small_ints,
    "mixed": plain_floats | small_ints,
    "zeros": st.sampled_from([0.0, -0.0, 1.0, -1.0]),  # min and max keep the first of equals
}


@st.composite
def batches(draw: st.DrawFn, newest: int, watermark: int, dense: bool) -> list[Record]:
    """Records around ``newest`` (the newest event time so far), out of order, some behind
    ``watermark`` (late) unless the batch is in time; one value mode and one key pool per
    batch, so that many batches can be folded as columns.  ``dense``: two keys, records close
    together and mostly in time, so that batches fold onto the same accumulators."""
    keys = st.sampled_from(["a", "b"] if dense else draw(st.sampled_from(KEY_POOLS)))
    mode = draw(st.sampled_from(sorted(VALUE_MODES)))
    numbers = VALUE_MODES[mode]
    missing = draw(st.integers(0, 7)) == 0  # some records without the field
    spread = 5 if dense else draw(st.sampled_from([5, 40, 120]))
    low = newest - spread
    if draw(st.integers(0, 5 if dense else 2)):  # in time: no record behind the watermark
        low = max(low, watermark)
    records: list[Record] = []
    for _ in range(draw(st.integers(0, 12))):
        t = draw(st.integers(low, max(low, newest) + spread))
        value: Any = {"w": 0} if missing and draw(st.booleans()) else {"v": draw(numbers)}
        records.append([t, draw(keys), value])
    if records and draw(st.integers(0, 9)) == 0:  # an event time add_columns does not take
        at = draw(st.integers(0, len(records)))
        records.insert(at, [draw(st.sampled_from(FAR_T)), "a", {"v": 1.5}])
    return records


@st.composite
def runs(draw: st.DrawFn, sliding: bool) -> tuple[WindowSpec, list[Step], int]:
    dense = draw(st.booleans())
    size = draw(st.integers(10 if dense else 1, 50))
    slide = draw(st.integers(1, size)) if sliding else None
    lateness = draw(st.sampled_from([0, 0, 1, size - 1, size, 3 * size]) | st.integers(0, 60))
    spec = WindowSpec(size, slide, lateness)
    small = draw(st.integers(0, 4)) == 0  # max_open_windows small enough to reach
    bound = draw(st.sampled_from([1, 3, 10])) if small else 1_000_000
    newest = draw(st.integers(-300, 300))
    watermark = MIN_WATERMARK
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 8))):
        count = draw(st.sampled_from([1, 1, 1, 0, 2]))
        step = [draw(batches(newest, watermark, dense)) for _ in range(count)]
        near = [r[0] for recs in step for r in recs if abs(r[0]) < 2**40]
        newest = max([newest, *near])
        watermark = next_watermark(draw, watermark, newest, size, choices=5, jump=90, edges=(-1, 2))
        steps.append((step, watermark))
    return spec, steps, bound


# ---- the reference -----------------------------------------------------------------------------


class Reference:
    """The rules of windows.py written out: a record folds into each of its windows whose end
    is above the watermark; into a fired one (and its result is emitted at once) while end +
    lateness is above it, else it is dropped for that window.  A watermark fires the windows
    with end <= it, by end, start and key first seen, then purges those past their lateness.
    At most ``bound`` (window, key) accumulators: one more is not opened (``state_full``); a
    record without the field holds nothing and counts as an error of the step."""

    def __init__(self, spec: WindowSpec, kind: str, bound: int, field: str | None) -> None:
        self.spec, self.kind, self.bound, self.field = spec, kind, bound, field
        self.watermark = MIN_WATERMARK
        self.windows: dict[int, dict[Any, Any]] = {}  # start -> key -> accumulator
        self.fired: set[int] = set()
        self.counters: Counter[str] = Counter()

    def fold(self, acc: Any, x: Any) -> Any:
        kind = self.kind
        if kind == "count":
            return 1 if acc is None else acc + 1
        if kind == "sum":
            return 0 + x if acc is None else acc + x
        if kind == "mean":
            return [0 + x, 1] if acc is None else [acc[0] + x, acc[1] + 1]
        if acc is None:
            return [x]
        better = x < acc[0] if kind == "min" else x > acc[0]
        return [x] if better else acc

    def result(self, acc: Any) -> Any:
        if self.kind in ("count", "sum"):
            return acc
        if self.kind == "mean":
            return float(acc[0] / acc[1])
        return acc[0]

    def out(self, start: int, key: Any, acc: Any) -> Out:
        end = start + self.spec.size_ms
        return (end - 1, key, {"key": key, "start": start, "end": end, "value": self.result(acc)})

    def add(self, t: int, key: Any, value: dict[str, Any]) -> list[Out]:
        self.counters["records"] += 1
        outputs: list[Out] = []
        for start in starts_holding(self.spec, t):
            end = start + self.spec.size_ms
            late = end <= self.watermark
            if late and end + self.spec.allowed_lateness_ms <= self.watermark:
                self.counters["late_dropped"] += 1
                continue
            accs = self.windows.get(start, {})
            held = accs.get(key)  # an accumulator is never None
            if held is None and sum(map(len, self.windows.values())) >= self.bound:
                self.counters["state_full"] += 1
                continue
            if self.field is not None and self.field not in value:
                self.counters["fn_errors"] += 1
                break  # the first window the record reaches raises: nothing is held
            self.windows[start] = accs
            if late:
                self.fired.add(start)
            accs[key] = self.fold(held, value if self.field is None else value[self.field])
            if late:
                self.counters["late_fired"] += 1
                outputs.append(self.out(start, key, accs[key]))  # the record's key
        return outputs

    def advance(self, watermark: int) -> list[Out]:
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        size, lateness = self.spec.size_ms, self.spec.allowed_lateness_ms
        due = sorted(s for s in self.windows if s not in self.fired and s + size <= watermark)
        outputs = [self.out(s, key, acc) for s in due for key, acc in self.windows[s].items()]
        self.fired.update(due)
        self.counters["fired"] += len(outputs)
        for start in [s for s in self.fired if s + size + lateness <= watermark]:
            del self.windows[start]
            self.fired.discard(start)
        return outputs

    def flush(self) -> list[Out]:
        due = sorted(s for s in self.windows if s not in self.fired)
        outputs = [self.out(s, key, acc) for s in due for key, acc in self.windows[s].items()]
        self.counters["fired"] += len(outputs)
        self.windows.clear()
        self.fired.clear()
        self.watermark = MAX_WATERMARK
        return outputs

    def snapshot_windows(self) -> list[Any]:
        return [
            [s, [[encode_key(k), acc] for k, acc in accs.items()]]
            for s, accs in sorted(self.windows.items())
        ]


# ---- the three paths ---------------------------------------------------------------------------


def op_of(spec: WindowSpec, kind: str, field: str | None = "v") -> WindowOp:
    window: dict[str, Any] = (
        {"tumbling": spec.size_ms / 1000}
        if spec.tumbling
        else {"sliding": {"size": spec.size_ms / 1000, "slide": spec.slide / 1000}}
    )
    return WindowOp(
        type="window",
        name="w",
        input="src",
        aggregate=kind,
        field=field,
        allowed_lateness=spec.allowed_lateness_ms / 1000,
        **window,
    )


def per_record(state: WindowState, steps: list[Step]) -> tuple[list[Record], Counter[str]]:
    outputs: list[Out] = []
    errors: Counter[str] = Counter()
    for step_batches, watermark in steps:
        for records in step_batches:
            for t, key, value in records:
                try:
                    outputs += state.add(key, t, value)
                except AggregateError:
                    errors["fn_errors"] += 1
        outputs += state.advance(watermark)
    return [list(o) for o in outputs], errors


def is_plain(cols: Columns, step: WindowStep, watermark: int) -> bool:
    """A batch add_columns must take: tumbling, no late record, hashable keys and (but for
    count) floats, which min and max take when no two distinct bits compare equal."""
    spec, field = step.spec, step.aggregate_field
    if field is None:
        values = cols.value
    elif cols.fields is None or list(cols.fields) != [field]:
        return False
    else:
        values = cols.fields[field]
    if not spec.tumbling or not len(cols):
        return False
    if isinstance(cols.key, list) and any(isinstance(k, list) for k in cols.key):
        return False
    size = spec.size_ms
    ts = cols.t.tolist()
    if any(abs(t) >= SAFE_T or t - t % size + size <= watermark for t in ts):
        return False
    if step.kind == "count":
        return True
    if not isinstance(values, np.ndarray) or values.dtype != np.float64:
        return False
    return step.kind not in ("min", "max") or not ((values == 0).any() or np.isnan(values).any())


def columnar(
    step: WindowStep, steps: list[Step], wire: bool, bound: int
) -> tuple[list[Record], list[bool]]:
    """Outputs of ``step`` fed batches of columns (``wire``: after encode and decode, numpy
    views of the bytes), and whether add_columns took each batch it was given."""
    state = step.state = WindowState(step.spec, step.aggregate, max_open_windows=bound)
    fold = state.add_columns
    calls: list[tuple[np.ndarray, bool]] = []

    def spy(keys: Any, ts: np.ndarray, values: Any) -> bool:
        took = fold(keys, ts, values)
        calls.append((ts, took))
        return took

    state.add_columns = spy  # type: ignore[method-assign]
    outputs: list[Record] = []
    taken: list[bool] = []
    for records_of_step, watermark in steps:
        batches = []
        for records in records_of_step:
            cols = Columns.from_records(records)
            wired = decode_batch(encode_columns(cols, watermark, False))
            batches.append(wired if wire else Batch(watermark, False, columns=cols))
        plain = [b.columns for b in batches if is_plain(b.columns, step, state.watermark)]
        del calls[:]
        outputs += step.run(batches, watermark, False)
        taken += [took for _, took in calls]
        if bound >= 1_000_000:  # else a batch may pass the bound: per record then
            took = {id(ts): took for ts, took in calls}
            for cols in plain:
                assert took.get(id(cols.t)), f"add_columns refused {cols.records()!r:.300}"
    return outputs, taken


def in_order(snap: dict[str, Any]) -> dict[str, Any]:
    """The snapshot with its counters by name (they are counted in other orders)."""
    return {**snap, "counters": sorted(snap["counters"].items())}


def numbers_only(steps: list[Step]) -> list[Step]:
    """For an aggregate of whole values: each record's value its number (records without
    one left out: a value that is not a number is the user's error either way)."""
    return [
        ([[[t, k, v["v"]] for t, k, v in records if "v" in v] for records in step], watermark)
        for step, watermark in steps
    ]


def check(spec: WindowSpec, steps: list[Step], bound: int, kind: str, field: str | None) -> None:
    if field is None:
        steps = numbers_only(steps)
    ref = Reference(spec, kind, bound, field)
    expected: list[Out] = []
    for step_batches, watermark in steps:
        for records in step_batches:
            for t, key, value in records:
                expected += ref.add(t, key, value)
        expected += ref.advance(watermark)
    expected_records = [list(o) for o in expected]

    state = WindowState(spec, make_aggregate(kind, field=field), max_open_windows=bound)
    outputs, errors = per_record(state, steps)
    assert_same(outputs, expected_records, "per record")
    snap = state.snapshot()
    assert_same(snap["windows"], ref.snapshot_windows(), "per-record state")
    assert snap["watermark"] == ref.watermark
    held = state.open_windows
    assert held == sum(map(len, ref.windows.values()))
    counted = +ref.counters
    assert +(state.counters + errors) == counted
    flushed = [list(o) for o in state.flush()]
    assert_same(flushed, [list(o) for o in ref.flush()], "per record: flush")

    for wire in (False, True):
        how = "decoded columns" if wire else "columns"
        step = WindowStep(op_of(spec, kind, field), Counter())
        assert (step.spec.size_ms, step.spec.slide, step.spec.allowed_lateness_ms) == (
            spec.size_ms,
            spec.slide,
            spec.allowed_lateness_ms,
        )
        got, taken = columnar(step, steps, wire, bound)
        event(f"{how}: add_columns took {'some' if any(taken) else 'no'} batch")
        assert_same(got, expected_records, how)
        assert_same(in_order(step.state.snapshot()), in_order(snap), f"{how}: snapshot")
        assert step.state.open_windows == held
        shown = ("fn_errors", "late_dropped", "late_fired", "state_full")
        assert +step.counters == +Counter({k: counted[k] for k in shown})
        assert_same(step.run([], END_OF_TIME, True), flushed, f"{how}: flush")


# ---- the properties ---------------------------------------------------------------------------


@SETTINGS
@given(runs(sliding=False), st.sampled_from(FOLDED_KINDS), st.sampled_from(["v", "v", None]))
def test_tumbling_paths_agree_with_the_reference(
    run: tuple[WindowSpec, list[Step], int], kind: str, field: str | None
) -> None:
    check(*run, kind, field)


@settings(SETTINGS, max_examples=80)
@given(runs(sliding=True), st.sampled_from(FOLDED_KINDS), st.sampled_from(["v", None]))
def test_sliding_paths_agree_with_the_reference(
    run: tuple[WindowSpec, list[Step], int], kind: str, field: str | None
) -> None:
    check(*run, kind, field)


# ---- add_columns takes what it can -------------------------------------------------------------

PLAIN: list[Record] = [
    [12, "a", {"v": 2.5}],
    [3, "b", {"v": -1.25}],
    [7, "a", {"v": 1e-3}],
    [15, "b", {"v": 7.0}],
    [-4, "c", {"v": 3.5}],
    [5, "b", {"v": -8.0}],
]


def unused(*args: Any) -> Any:
    raise AssertionError("the batch went per record")


@pytest.mark.parametrize("kind", FOLDED_KINDS)
def test_add_columns_takes_a_plain_float_batch(kind: str) -> None:
    """Decoded floats (numpy views), two windows, existing accumulators on the second batch:
    folded as columns, with the per-record path's results."""
    spec = WindowSpec(10)
    by_record = WindowState(spec, make_aggregate(kind, field="v"))
    for t, key, value in PLAIN + PLAIN[::-1]:
        by_record.add(key, t, value)
    step = WindowStep(op_of(spec, kind), Counter())
    step.state.add = unused  # type: ignore[method-assign,assignment]
    outputs: list[Record] = []
    for records, watermark in [(PLAIN, -10), (PLAIN[::-1], 0)]:
        cols = decode_batch(encode_columns(Columns.from_records(records), watermark, False)).columns
        assert isinstance(cols["v"], np.ndarray) and not cols["v"].flags.writeable
        assert step.state.add_columns(cols.key, cols.t, cols["v"]) is True
        outputs += step.run([], watermark, False)
    assert step.counters["fn_errors"] == 0
    assert step.state.counters["records"] == 2 * len(PLAIN)
    expected = [list(o) for o in by_record.advance(0) + by_record.flush()]
    assert_same(outputs + step.run([], END_OF_TIME, True), expected, kind)


def test_window_step_folds_a_plain_batch_as_columns() -> None:
    step = WindowStep(op_of(WindowSpec(10), "sum"), Counter())
    step.state.add = unused  # type: ignore[method-assign,assignment]
    batch = Batch(20, False, columns=Columns.from_records(PLAIN))
    assert step.run([batch], 20, False) == [
        [-1, "c", {"key": "c", "start": -10, "end": 0, "value": 3.5}],
        [9, "b", {"key": "b", "start": 0, "end": 10, "value": -9.25}],
        [9, "a", {"key": "a", "start": 0, "end": 10, "value": 1e-3}],
        [19, "a", {"key": "a", "start": 10, "end": 20, "value": 2.5}],
        [19, "b", {"key": "b", "start": 10, "end": 20, "value": 7.0}],
    ]
    assert step.counters["fn_errors"] == 0


def test_equal_keys_of_other_types_keep_the_one_first_seen_in_each_window() -> None:
    """1 and True are one dict key: window [1, 2) first sees 1, window [0, 1) True."""
    records: list[Record] = [[1, 1, {"v": 1.0}], [0, "a", {"v": 2.0}], [0, True, {"v": 4.0}]]
    by_record = WindowState(WindowSpec(1), make_aggregate("sum", field="v"))
    for t, key, value in records:
        by_record.add(key, t, value)
    by_columns = WindowState(WindowSpec(1), make_aggregate("sum", field="v"))
    cols = Columns.from_records(records)
    assert by_columns.add_columns(cols.key, cols.t, cols["v"]) is True
    fired = by_columns.flush()
    assert [type(o[1]) for o in fired] == [str, bool, int]
    assert_same(fired, by_record.flush(), "keys")


def test_float_sums_reach_inf_and_nan_quietly_as_python_floats() -> None:
    keys, values = ["a", "b", "a", "b"], [1e308, float("inf"), 1e308, -float("inf")]
    by_record = WindowState(WindowSpec(10), make_aggregate("sum"))
    by_columns = WindowState(WindowSpec(10), make_aggregate("sum"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns of both where Python's + does not
        for key, x in zip(keys, values, strict=True):
            by_record.add(key, 1, x)
        assert by_columns.add_columns(keys, np.ones(4, dtype=np.int64), np.array(values))
    fired = by_columns.flush()
    assert fired[0][2]["value"] == float("inf")
    assert_same(fired, by_record.flush(), "sums")


@pytest.mark.parametrize(
    ("first", "then"),
    [([2**62, 2**62], [1]), ([2**63 - 1], [1, 1]), ([-(2**63)], [-1]), ([3], [2**62 - 1, 2**62])],
)
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_int_sums_that_would_leave_int64_are_python_ints(
    first: list[int], then: list[int], kind: str
) -> None:
    """Two batches of int64 columns onto one accumulator: where the sum could leave int64,
    add_columns refuses (changing nothing) and the per-record fold gives Python's int."""
    by_record = WindowState(WindowSpec(10), make_aggregate(kind, field="v"))
    step = WindowStep(op_of(WindowSpec(10), kind), Counter())
    for values in (first, then):
        for x in values:
            by_record.add(None, 1, {"v": x})
        cols = Columns(np.ones(len(values), dtype=np.int64), None, {"v": np.array(values)})
        assert isinstance(cols["v"], np.ndarray) and cols["v"].dtype == np.int64
        step.run([Batch(0, False, columns=cols)], 0, False)
    total = sum(first + then)
    fired = step.run([], END_OF_TIME, True)
    assert fired[0][2]["value"] == (total if kind == "sum" else total / len(first + then))
    assert_same(fired, [list(o) for o in by_record.flush()], "int sums")
