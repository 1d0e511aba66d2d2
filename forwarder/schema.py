"""Settings as people write them, checked: frozen dataclasses filled from mappings (YAML, JSON).

The daemon's config (:mod:`forwarder.config`) and the settings of a ``link/shape`` command
(:mod:`forwarder.face.link_settings`) are read by these few rules instead of pydantic, whose
import and models cost every idle forwarder about 8 MB (issue 23).  A field's type is read from
its annotation: ``int``, ``float``, ``str``, a ``Literal``, ``X | None``, ``list[X]`` or another
:class:`Settings` class; its bounds and its own check from :func:`setting`.  Every problem is
collected with its path (``faces.0.shaper.loss``) and a message in pydantic's words, so the
errors read as they did.  Unknown fields are problems: a typo is reported, not ignored.

Lax mode (config files) also takes numbers written as strings (``"5"``), and whole floats for
integers (``5.0``), as pydantic did; strict mode (JSON commands) takes a JSON number of the
right kind only.  Booleans are never numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, dataclass_transform

Loc = tuple[str | int, ...]
S = TypeVar("S", bound="Settings")

_BOUNDS: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "ge": (lambda v, b: v >= b, "greater than or equal to"),
    "gt": (lambda v, b: v > b, "greater than"),
    "le": (lambda v, b: v <= b, "less than or equal to"),
    "lt": (lambda v, b: v < b, "less than"),
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where, what kind (``unknown``, ``missing``, ``type``,
    ``bound``, ``check``), the message, and the value found there."""

    loc: Loc
    kind: str
    msg: str
    value: object = None

    @property
    def where(self) -> str:
        return ".".join(str(p) for p in self.loc)


class SchemaError(ValueError):
    """The input does not fit the settings class; ``problems`` says everything that is wrong."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(f"{p.where or '(top level)'}: {p.msg}" for p in problems))
        self.problems = problems


def setting(
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Callable[[], Any] | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    check: Callable[[Any], Any] | None = None,
) -> Any:
    """A field with bounds and a check (a function that returns the value or raises ValueError
    with what to write instead); no default makes the field required."""
    bounds = {k: b for k, b in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if b is not None}
    metadata = {"bounds": bounds, "check": check}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass_transform(frozen_default=True, field_specifiers=(setting, dataclasses.field))
class Settings:
    """Base of settings classes, each a frozen dataclass: read them with :func:`fill`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True)(cls)

    @property
    def fields_given(self) -> frozenset[str]:
        """The fields the input named (a section left out may mean "the default place")."""
        given: frozenset[str] = self.__dict__.get("_given", frozenset())
        return given


def field_names(cls: type[Settings]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]


def fill(cls: type[S], data: object, *, strict: bool = False) -> S:
    """``data`` (a mapping) as a ``cls``; SchemaError with every problem otherwise."""
    problems: list[Problem] = []
    obj = _settings(cls, data, (), strict, problems)
    if problems:
        raise SchemaError(problems)
    assert obj is not None
    return obj


_HINTS: dict[type[Settings], dict[str, Any]] = {}


def _hints(cls: type[Settings]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _settings(
    cls: type[S], data: object, loc: Loc, strict: bool, problems: list[Problem]
) -> S | None:
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        problems.append(Problem(loc, "type", "Input should be a valid dictionary", data))
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = _hints(cls)
    start = len(problems)
    values: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                problems.append(Problem((*loc, name), "missing", "Field required"))
            continue
        before = len(problems)
        value = _value(hints[name], data[name], (*loc, name), strict, problems)
        if len(problems) == before:  # bounds and checks only for a value of the right type
            value = _constrain(f, value, (*loc, name), problems)
        values[name] = value
    problems.extend(
        Problem((*loc, str(key)), "unknown", "unknown field", data[key])
        for key in data
        if key not in fields
    )
    if len(problems) > start:
        return None
    obj = cls(**values)
    object.__setattr__(obj, "_given", frozenset(values))  # see Settings.fields_given
    return obj


def _constrain(f: dataclasses.Field[Any], value: Any, loc: Loc, problems: list[Problem]) -> Any:
    if value is None:
        return value
    for kind, bound in f.metadata.get("bounds", {}).items():
        holds, words = _BOUNDS[kind]
        if not holds(value, bound):
            problems.append(Problem(loc, "bound", f"Input should be {words} {bound}", value))
            return value
    check = f.metadata.get("check")
    if check is not None:
        try:
            return check(value)
        except ValueError as exc:
            problems.append(Problem(loc, "check", str(exc), value))
    return value


def _value(tp: Any, value: object, loc: Loc, strict: bool, problems: list[Problem]) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        (tp,) = [a for a in args if a is not type(None)]  # X | None is the only union used
        return _value(tp, value, loc, strict, problems)
    if origin is Literal:
        if value in args and not isinstance(value, bool):
            return value
        choices = ", ".join(repr(a) for a in args[:-1]) + f" or {args[-1]!r}"
        problems.append(Problem(loc, "type", f"Input should be {choices}", value))
        return value
    if origin is list:
        if not isinstance(value, list | tuple):
            problems.append(Problem(loc, "type", "Input should be a valid list", value))
            return value
        return [_value(args[0], item, (*loc, i), strict, problems) for i, item in enumerate(value)]
    if isinstance(tp, type) and issubclass(tp, Settings):
        return _settings(tp, value, loc, strict, problems)
    if tp is int:
        return _int(value, loc, strict, problems)
    if tp is float:
        return _float(value, loc, strict, problems)
    if tp is str:
        if not isinstance(value, str):
            problems.append(Problem(loc, "type", "Input should be a valid string", value))
        return value
    raise TypeError(f"{loc}: settings fields of type {tp!r} are not supported")


def _int(value: object, loc: Loc, strict: bool, problems: list[Problem]) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    msg = "Input should be a valid integer"
    if not strict and isinstance(value, float) and math.isfinite(value):
        if value.is_integer():
            return int(value)
        msg += ", got a number with a fractional part"
    elif not strict and isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            msg += ", unable to parse string as an integer"
    problems.append(Problem(loc, "type", msg, value))
    return value


def _float(value: object, loc: Loc, strict: bool, problems: list[Problem]) -> Any:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif not strict and isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = float(value.strip())
    if number is None:
        problems.append(Problem(loc, "type", "Input should be a valid number", value))
        return value
    if not math.isfinite(number):
        # a delay, a rate, a share: infinity or NaN is never meant
        problems.append(Problem(loc, "type", "Input should be a finite number", value))
    return number
