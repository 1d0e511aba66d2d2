"""Window aggregates: count, sum, mean, min, max and a user's reduce, folded in arrival order.

An accumulator is a plain msgpack-able value (a number or a list) because window state is
checkpointed.  ``add`` may update a list accumulator in place and returns it: the window state
owns its accumulators and copies them when it takes a snapshot.  Folding is strictly left to
right in the order records arrive, so a reference folded in the same order gives the same bits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

KINDS = ("count", "sum", "mean", "min", "max", "reduce")
_SHOWN = 80  # characters of a bad value shown in an error


class AggregateError(ValueError):
    """A record's value does not carry the aggregated field, or cannot be aggregated."""


class Aggregate(Protocol):
    def create(self) -> Any: ...

    def add(self, acc: Any, value: Any) -> Any: ...

    def result(self, acc: Any) -> Any: ...


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


class _Base:
    kind = ""

    def __init__(self, field: str | None) -> None:
        self.field = field

    def _quantity(self, value: Any) -> Any:
        field = self.field
        if field is None:
            return value
        try:
            return value[field]
        except (KeyError, TypeError, IndexError):
            raise AggregateError(
                f"{self.kind} of field {field!r}: record value {_shown(value)} is not a mapping"
                f" with key {field!r} (give field= a key every record has, or field=None to"
                " aggregate the whole value)"
            ) from None

    def _incomparable(self, value: Any, acc: Any) -> AggregateError:
        what = "values" if self.field is None else f"field {self.field!r}"
        return AggregateError(
            f"{self.kind} of {what}: {_shown(value)} cannot be compared with {_shown(acc)}"
            " (every record needs a value of one comparable type)"
        )

    def __repr__(self) -> str:
        return f"make_aggregate({self.kind!r}, field={self.field!r})"


class _Count(_Base):
    kind = "count"

    def create(self) -> int:
        return 0

    def add(self, acc: int, value: Any) -> int:
        if self.field is not None:
            self._quantity(value)  # a record without the field is an error for every kind
        return acc + 1

    def result(self, acc: int) -> int:
        return acc


class _Sum(_Base):
    kind = "sum"

    def create(self) -> Any:
        return 0

    def add(self, acc: Any, value: Any) -> Any:
        x = value if self.field is None else self._quantity(value)
        try:
            return acc + x
        except TypeError:
            raise self._not_number(x) from None

    def _not_number(self, x: Any) -> AggregateError:
        what = "value" if self.field is None else f"field {self.field!r}"
        return AggregateError(f"{self.kind} of {what}: {_shown(x)} is not a number")

    def result(self, acc: Any) -> Any:
        return acc


class _Mean(_Sum):
    kind = "mean"

    def create(self) -> list[Any]:
        return [0, 0]  # [sum, count]

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        x = value if self.field is None else self._quantity(value)
        try:
            acc[0] += x
        except TypeError:
            raise self._not_number(x) from None
        acc[1] += 1
        return acc

    def result(self, acc: list[Any]) -> float:
        return float(acc[0] / acc[1])


class _Min(_Base):
    """The accumulator is ``[]`` before the first value, then ``[smallest so far]``."""

    kind = "min"

    def create(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        x = value if self.field is None else self._quantity(value)
        if not acc:
            acc.append(x)
            return acc
        try:
            if x < acc[0]:  # strict: the first of equal values is kept
                acc[0] = x
        except TypeError:
            raise self._incomparable(x, acc[0]) from None
        return acc

    def result(self, acc: list[Any]) -> Any:
        return acc[0] if acc else None


class _Max(_Min):
    kind = "max"

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        x = value if self.field is None else self._quantity(value)
        if not acc:
            acc.append(x)
            return acc
        try:
            if x > acc[0]:
                acc[0] = x
        except TypeError:
            raise self._incomparable(x, acc[0]) from None
        return acc


class _Reduce(_Min):
    """``fn`` folds left to right from the first value; ``[]`` until there is one."""

    kind = "reduce"

    def __init__(self, field: str | None, fn: Callable[[Any, Any], Any]) -> None:
        super().__init__(field)
        self.fn = fn

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        x = value if self.field is None else self._quantity(value)
        if acc:
            acc[0] = self.fn(acc[0], x)
        else:
            acc.append(x)
        return acc


def make_aggregate(
    kind: str,
    *,
    field: str | None = None,
    reduce: Callable[[Any, Any], Any] | None = None,
) -> Aggregate:
    """The aggregate ``kind`` of ``value[field]`` (of the whole value without ``field``)."""
    if kind not in KINDS:
        raise ValueError(f"aggregate kind {kind!r} is unknown: use one of {', '.join(KINDS)}")
    if field is not None and (not isinstance(field, str) or not field):
        raise ValueError(
            f"aggregate field {field!r}: give the name (a non-empty str) of the key to aggregate"
            " in each record's value, or None to aggregate the whole value"
        )
    if kind == "reduce":
        if reduce is None or not callable(reduce):
            raise ValueError(
                f"aggregate kind 'reduce' needs reduce=, a callable (acc, value) -> acc"
                f" (got {reduce!r})"
            )
        return _Reduce(field, reduce)
    if reduce is not None:
        raise ValueError(
            f"aggregate kind {kind!r} takes no reduce= (reduce is only for kind 'reduce')"
        )
    kinds: dict[str, Callable[[str | None], Aggregate]] = {
        "count": _Count,
        "sum": _Sum,
        "mean": _Mean,
        "min": _Min,
        "max": _Max,
    }
    return kinds[kind](field)
