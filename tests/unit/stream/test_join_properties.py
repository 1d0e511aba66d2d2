"""A window join's outputs are the same whether its input batches travel as records or as
columns (encoded and decoded: numpy views of the bytes, values rebuilt from them), and both
are the rules of join.py written out plainly: same pairs in the same order, with the same
types and float bits, the same counters and the same snapshot.  (No I/O.)"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compute.stream.batch import END_OF_TIME, Batch, decode_batch
from compute.stream.columns import Columns, encode_columns
from compute.stream.graph import JoinOp
from compute.stream.operators import JoinStep
from compute.stream.windows import MAX_WATERMARK, MIN_WATERMARK, Out, WindowSpec, encode_key
from tests.unit.stream.exact import assert_same
from tests.unit.stream.watermarks import next_watermark, starts_holding

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Record = list[Any]  # [t, key, value]
Step = tuple[list[list[Record]], list[list[Record]], int]  # left batches, right batches, watermark

# True == 1 as a dict key; a tuple key comes back from the wire as a list (hashable() mends it)
KEYS: list[Any] = ["a", "b", 1, 0, -5, 2**40, None, True, ("x", 1), ("x", (None, 2))]
NAN = float("nan")

numbers = (
    st.floats()
    | st.sampled_from([-0.0, 0.0, NAN, -NAN, float("inf"), 1e308, 5e-324])
    | st.integers(-(2**63), 2**64 - 1)  # beyond int64 too, within what msgpack packs
)
# msgpack gives tuples back as lists, so values here hold none
scalars = numbers | st.booleans() | st.none() | st.text(max_size=4) | st.binary(max_size=3)
anything = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=4,
)
VALUES = {
    "fields": st.fixed_dictionaries({"v": st.floats(), "n": st.integers(-(2**40), 2**40)}),
    "number": numbers,  # one value column: float64, int64 or a list
    "floats": st.floats(),
    "anything": anything,
}


@st.composite
def batches(draw: st.DrawFn, newest: int, watermark: int) -> list[Record]:
    keys = st.sampled_from(draw(st.sampled_from([KEYS, ["a", "b"], [7, -7], [None]])))
    values = VALUES[draw(st.sampled_from(sorted(VALUES)))]
    spread = draw(st.sampled_from([5, 40]))
    low = newest - spread
    if draw(st.booleans()):  # in time: no record behind the watermark
        low = max(low, watermark)
    return [
        [draw(st.integers(low, max(low, newest) + spread)), draw(keys), draw(values)]
        for _ in range(draw(st.integers(0, 8)))
    ]


@st.composite
def runs(draw: st.DrawFn) -> tuple[WindowSpec, int, list[Step]]:
    size = draw(st.integers(1, 50))
    slide = draw(st.none() | st.integers(1, size))
    spec = WindowSpec(size, slide)
    n_left, n_right = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    newest = draw(st.integers(-300, 300))
    watermark = MIN_WATERMARK
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 8))):
        lefts = [draw(batches(newest, watermark)) for _ in range(n_left)]
        rights = [draw(batches(newest, watermark)) for _ in range(n_right)]
        newest = max([newest, *(r[0] for recs in lefts + rights for r in recs)])
        watermark = next_watermark(draw, watermark, newest, size, choices=4, jump=60, edges=(-1, 1))
        steps.append((lefts, rights, watermark))
    return spec, n_left, steps


class Reference:
    """join.py's rules: a record is buffered in each of its windows whose end is above the
    watermark, and dropped for the others; a watermark joins the windows with end <= it (by
    end, start, key first seen on either side; left-major pairs in arrival order) and drops
    them."""

    def __init__(self, spec: WindowSpec) -> None:
        self.spec = spec
        self.watermark = MIN_WATERMARK
        self.windows: dict[int, dict[Any, tuple[list[Any], list[Any]]]] = {}
        self.counters: Counter[str] = Counter()

    def add(self, side: str, t: int, key: Any, value: Any) -> None:
        self.counters[side] += 1
        for start in starts_holding(self.spec, t):
            if start + self.spec.size_ms <= self.watermark:
                self.counters["late_dropped"] += 1
            else:
                sides = self.windows.setdefault(start, {}).setdefault(key, ([], []))
                sides[side == "right"].append(value)

    def fire(self, watermark: int) -> list[Out]:
        size = self.spec.size_ms
        outputs: list[Out] = []
        for start in sorted(s for s in self.windows if s + size <= watermark):
            for key, (lefts, rights) in self.windows.pop(start).items():
                for left in lefts:
                    for right in rights:
                        pair = {"key": key, "start": start, "end": start + size}
                        pair.update(left=left, right=right)
                        outputs.append((start + size - 1, key, pair))
        self.counters["fired"] += len(outputs)
        return outputs

    def advance(self, watermark: int) -> list[Out]:
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        return self.fire(watermark)

    def flush(self) -> list[Out]:
        self.watermark = MAX_WATERMARK
        return self.fire(MAX_WATERMARK + self.spec.size_ms)

    def snapshot_windows(self) -> list[Any]:
        return [
            [s, [[encode_key(k), lefts, rights] for k, (lefts, rights) in sides.items()]]
            for s, sides in sorted(self.windows.items())
        ]


def op_of(spec: WindowSpec) -> JoinOp:
    window: dict[str, Any] = (
        {"tumbling": spec.size_ms / 1000}
        if spec.tumbling
        else {"sliding": {"size": spec.size_ms / 1000, "slide": spec.slide / 1000}}
    )
    return JoinOp(type="join", name="j", left="l", right="r", **window)


def batch_of(records: list[Record], watermark: int, wire: bool) -> Batch:
    if not wire:
        return Batch(watermark, False, records=records)
    return decode_batch(encode_columns(Columns.from_records(records), watermark, False))


@SETTINGS
@given(runs())
def test_records_and_columns_join_as_the_rules_say(run: tuple[WindowSpec, int, list[Step]]) -> None:
    spec, n_left, steps = run
    ref = Reference(spec)
    expected: list[Out] = []
    for lefts, rights, watermark in steps:
        for side, side_batches in (("left", lefts), ("right", rights)):
            for records in side_batches:
                for t, key, value in records:
                    ref.add(side, t, key, value)
        expected += ref.advance(watermark)
    windows = ref.snapshot_windows()
    counters = +ref.counters
    tail = ref.flush()

    snaps = []
    for wire in (False, True):
        how = "decoded columns" if wire else "records"
        step = JoinStep(op_of(spec), n_left, Counter())
        assert (step.spec.size_ms, step.spec.slide) == (spec.size_ms, spec.slide)
        got: list[Record] = []
        for lefts, rights, watermark in steps:
            inputs = [batch_of(records, watermark, wire) for records in lefts + rights]
            got += step.run(inputs, watermark, False)
        assert_same(got, [list(o) for o in expected], how)
        snap = step.snapshot()
        assert_same(snap["windows"], windows, f"{how}: snapshot")
        assert +step.state.counters == counters
        snaps.append(snap)
        assert_same(step.run([], END_OF_TIME, True), [list(o) for o in tail], f"{how}: flush")
        assert step.state.buffered == 0
    assert_same(snaps[0], snaps[1], "snapshots")
