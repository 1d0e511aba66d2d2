"""forwarder/schema.py: settings filled from mappings, every problem named by its path."""

from __future__ import annotations

from typing import Literal

import pytest

from forwarder.schema import SchemaError, Settings, field_names, fill, setting


def _positive_even(v: int) -> int:
    if v % 2:
        raise ValueError(f"{v} is odd; use an even number")
    return v


class Inner(Settings):
    rate: float | None = setting(default=None, gt=0)
    count: int = setting(default=2, ge=0, le=10, check=_positive_even)


class Outer(Settings):
    name: str = setting()
    level: Literal["low", "high"] = "low"
    inner: Inner = setting(default_factory=Inner)
    items: list[Inner] = setting(default_factory=list)
    tags: list[str] = setting(default_factory=list)


def _problems(data: object, strict: bool = False) -> dict[str, str]:
    with pytest.raises(SchemaError) as err:
        fill(Outer, data, strict=strict)
    return {p.where: p.msg for p in err.value.problems}


def test_defaults_and_the_fields_given() -> None:
    out = fill(Outer, {"name": "a", "inner": {"rate": 2}})
    assert out == Outer(name="a", inner=Inner(rate=2.0, count=2))
    assert out.fields_given == {"name", "inner"} and out.inner.fields_given == {"rate"}
    assert out.items == [] and out.items is not Outer(name="b").items
    assert field_names(Inner) == ["rate", "count"]


def test_every_problem_is_named_by_its_path() -> None:
    got = _problems(
        {
            "level": "medium",
            "inner": {"count": 11, "rat": 1},
            "items": [{}, {"rate": 0}, {"count": 3}],
            "tags": ["x", 5],
            "extra": True,
        }
    )
    assert got == {
        "name": "Field required",
        "level": "Input should be 'low' or 'high'",
        "inner.count": "Input should be less than or equal to 10",
        "inner.rat": "unknown field",
        "items.1.rate": "Input should be greater than 0",
        "items.2.count": "3 is odd; use an even number",
        "tags.1": "Input should be a valid string",
        "extra": "unknown field",
    }
    assert _problems([]) == {"": "Input should be a valid dictionary"}
    assert _problems({"name": "a", "inner": None, "items": {}}) == {
        "inner": "Input should be a valid dictionary",
        "items": "Input should be a valid list",
    }


def test_lax_numbers_as_people_write_them() -> None:
    got = fill(Outer, {"name": "a", "inner": {"rate": "2.5", "count": "4"}}).inner
    assert (got.rate, got.count) == (2.5, 4)
    assert fill(Outer, {"name": "a", "inner": {"count": 4.0}}).inner.count == 4
    assert _problems({"name": "a", "inner": {"count": 4.5}}) == {
        "inner.count": "Input should be a valid integer, got a number with a fractional part"
    }
    assert _problems({"name": "a", "inner": {"count": "four"}}) == {
        "inner.count": "Input should be a valid integer, unable to parse string as an integer"
    }
    # a boolean is never a number, and a rate is finite
    assert _problems({"name": "a", "inner": {"count": True, "rate": float("inf")}}) == {
        "inner.count": "Input should be a valid integer",
        "inner.rate": "Input should be a finite number",
    }
    assert _problems({"name": 5}) == {"name": "Input should be a valid string"}


def test_strict_takes_json_numbers_of_the_right_kind_only() -> None:
    assert fill(Outer, {"name": "a", "inner": {"rate": 3}}, strict=True).inner.rate == 3.0
    assert _problems({"name": "a", "inner": {"rate": "3", "count": 4.0}}, strict=True) == {
        "inner.rate": "Input should be a valid number",
        "inner.count": "Input should be a valid integer",
    }
