"""Window aggregates: every kind, field extraction, errors, a user's reduce (no I/O)."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compute.stream.aggregates import KINDS, Aggregate, AggregateError, make_aggregate


def fold(aggregate: Aggregate, values: list[Any]) -> Any:
    acc = aggregate.create()
    for value in values:
        acc = aggregate.add(acc, value)
    return aggregate.result(acc)


def test_every_kind_on_plain_values() -> None:
    values = [3, -1.5, 7, 2]
    assert fold(make_aggregate("count"), values) == 4
    assert fold(make_aggregate("sum"), values) == 10.5
    mean = fold(make_aggregate("mean"), values)
    assert type(mean) is float and mean == 10.5 / 4
    assert fold(make_aggregate("min"), values) == -1.5
    assert fold(make_aggregate("max"), values) == 7
    assert fold(make_aggregate("reduce", reduce=lambda a, b: a * 10 + b), [1, 2, 3]) == 123


def test_field_extraction() -> None:
    values = [{"v": 4, "w": 100}, {"v": 1, "w": -5}, {"v": 10}]
    assert fold(make_aggregate("count", field="v"), values) == 3
    assert fold(make_aggregate("sum", field="v"), values) == 15
    assert fold(make_aggregate("mean", field="v"), values) == 5.0
    assert fold(make_aggregate("min", field="v"), values) == 1
    assert fold(make_aggregate("max", field="v"), values) == 10
    keep_last = make_aggregate("reduce", field="v", reduce=lambda a, b: b)
    assert fold(keep_last, values) == 10


def test_mean_of_ints_is_a_float_and_accumulates_sum_and_count() -> None:
    mean = make_aggregate("mean")
    acc = mean.add(mean.add(mean.create(), 1), 2)
    assert acc == [3, 2]
    result = mean.result(acc)
    assert type(result) is float and result == 1.5


def test_min_and_max_keep_the_first_of_equal_values() -> None:
    assert math.copysign(1, fold(make_aggregate("min"), [0.0, -0.0])) == 1
    assert math.copysign(1, fold(make_aggregate("min"), [-0.0, 0.0])) == -1
    assert math.copysign(1, fold(make_aggregate("max"), [-0.0, 0.0])) == -1


def test_min_max_reduce_of_nothing_is_none_and_none_is_a_value() -> None:
    for kind in ("min", "max"):
        agg = make_aggregate(kind)
        assert agg.result(agg.create()) is None
    # the first value is the initial accumulator even when it is None
    calls: list[tuple[Any, Any]] = []

    def pair(a: Any, b: Any) -> Any:
        calls.append((a, b))
        return [a, b]

    assert fold(make_aggregate("reduce", reduce=pair), [None, 1]) == [None, 1]
    assert calls == [(None, 1)]
    assert fold(make_aggregate("reduce", reduce=pair), ["only"]) == "only"
    assert len(calls) == 1  # one value: the reduce function is not called


@given(st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=50))
def test_folding_is_in_arrival_order_bit_for_bit(values: list[float]) -> None:
    total = 0.0
    for value in values:
        total += value
    assert fold(make_aggregate("sum"), values) == total
    assert fold(make_aggregate("mean"), values) == total / len(values)
    assert fold(make_aggregate("min"), values) == min(values)
    assert fold(make_aggregate("max"), values) == max(values)


@pytest.mark.parametrize("kind", ["count", "sum", "mean", "min", "max"])
def test_accumulators_survive_msgpack(kind: str) -> None:
    agg = make_aggregate(kind, field="v")
    values = [{"v": x} for x in (5, 2.5, 9, -1)]
    acc = agg.create()
    for value in values[:2]:
        acc = agg.add(acc, value)
    acc = msgpack.unpackb(msgpack.packb(acc))
    for value in values[2:]:
        acc = agg.add(acc, value)
    assert agg.result(acc) == fold(make_aggregate(kind, field="v"), values)


@pytest.mark.parametrize("kind", ["count", "sum", "mean", "min", "max"])
@pytest.mark.parametrize("value", [{"w": 1}, [1, 2], "text", 7, None])
def test_a_value_without_the_field_is_an_error_naming_it(kind: str, value: Any) -> None:
    agg = make_aggregate(kind, field="temp")
    with pytest.raises(AggregateError, match="'temp'") as caught:
        agg.add(agg.create(), value)
    assert repr(value) in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_a_long_bad_value_is_truncated_in_the_message() -> None:
    agg = make_aggregate("sum", field="temp")
    value = {"other": "x" * 10_000}
    with pytest.raises(AggregateError) as caught:
        agg.add(agg.create(), value)
    message = str(caught.value)
    assert "{'other': 'xxx" in message and "..." in message
    assert len(message) < 400


def test_values_that_cannot_be_aggregated() -> None:
    with pytest.raises(AggregateError, match="not a number"):
        fold(make_aggregate("sum"), [1, "two"])
    with pytest.raises(AggregateError, match=r"field 'v'.*not a number"):
        fold(make_aggregate("mean", field="v"), [{"v": [1]}])
    with pytest.raises(AggregateError, match="cannot be compared"):
        fold(make_aggregate("min"), [1, "two"])
    with pytest.raises(AggregateError, match="cannot be compared"):
        fold(make_aggregate("max", field="v"), [{"v": None}, {"v": 3}])


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="'median'") as caught:
        make_aggregate("median")
    for kind in KINDS:
        assert kind in str(caught.value)


def test_reduce_is_required_for_reduce_and_rejected_for_the_others() -> None:
    with pytest.raises(ValueError, match="reduce="):
        make_aggregate("reduce")
    with pytest.raises(ValueError, match="reduce="):
        make_aggregate("reduce", reduce=42)  # type: ignore[arg-type]
    for kind in ("count", "sum", "mean", "min", "max"):
        with pytest.raises(ValueError, match="reduce"):
            make_aggregate(kind, reduce=lambda a, b: a)


def test_bad_field_names_the_fix() -> None:
    with pytest.raises(ValueError, match="field"):
        make_aggregate("sum", field="")
    with pytest.raises(ValueError, match="field"):
        make_aggregate("sum", field=3)  # type: ignore[arg-type]
