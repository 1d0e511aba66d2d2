"""``reference/forwarder-config.md`` and ``reference/scenario-schema.md``, generated from the
code that checks those files: the forwarder's settings classes (:mod:`forwarder.config`, read by
:mod:`forwarder.schema`) and the scenario's pydantic models (:mod:`apps.scenario.schema`, read
by :mod:`apps.scenario.loader`).  A field's type, default and bounds come from its declaration,
its explanation from its ``description`` or the comments beside it, a section's from its class's
docstring, so a field added to the code appears here at the next build.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from docs_hooks.markdown import cell, class_field_comments, code, doc, table

PRIMITIVES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "top"


def _literal(args: tuple[Any, ...]) -> str:
    words = [code(json.dumps(a)) for a in args]
    return words[0] if len(words) == 1 else "one of " + ", ".join(words)


def _scalar(value: object) -> str:
    """A default as it is written in YAML."""
    if isinstance(value, str):
        return code(value) if value else code('""')
    if isinstance(value, list | tuple):
        return code(json.dumps(list(value)))
    return code(json.dumps(value))


# ---------------------------------------------------------------- the forwarder's config file


def _settings_type(tp: Any, anchors: dict[type, str]) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        text = " or ".join(_settings_type(a, anchors) for a in rest)
        return f"{text} or `null`" if len(rest) < len(args) else text
    if origin is Literal:
        return _literal(args)
    if origin is list:
        return f"list of {_settings_type(args[0], anchors)}"
    if isinstance(tp, type) and tp in anchors:
        return f"[section](#{anchors[tp]})"
    if tp in PRIMITIVES:
        return PRIMITIVES[tp]
    return code(getattr(tp, "__name__", repr(tp)))


def _settings_classes(root: type, path: str = "") -> Iterator[tuple[str, type]]:
    """``root`` and every settings class below it, with the YAML path that reaches it."""
    from forwarder.schema import Settings

    yield path, root
    hints = typing.get_type_hints(root)
    for f in dataclasses.fields(root):
        tp = hints[f.name]
        stack = [tp]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, Settings):
                many = typing.get_origin(tp) is list
                sub = f"{path}.{f.name}" if path else f.name
                yield from _settings_classes(t, sub + ("[]" if many else ""))
            stack += list(typing.get_args(t))


def _settings_default(f: dataclasses.Field[Any]) -> str:
    from forwarder.schema import Settings

    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "**required**"
    if isinstance(value, Settings):
        return "its section's defaults"
    return _scalar(value)


def _bounds(bounds: dict[str, float]) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    return ", ".join(f"{words[k]} {_number(v)}" for k, v in bounds.items())


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def forwarder_config_page() -> str:
    from forwarder.config import ForwarderConfig

    sections = list(_settings_classes(ForwarderConfig))
    anchors = {cls: _anchor(path) for path, cls in sections}
    out = [
        "# Forwarder configuration file\n",
        "What `icn fwd --config FILE` reads (YAML, or JSON): every field with its type, "
        "default and bounds, generated when the site is built from the settings classes that "
        "check the file (`forwarder/config.py`, read by `forwarder/schema.py`). Unknown fields "
        "are refused, so a typo is reported (with its line and the closest valid name) instead "
        "of being ignored; every problem of a file is reported at once. The "
        "[forwarder configuration guide](../guides/forwarder-config.md) shows the settings at "
        "work.\n",
    ]
    for path, cls in sections:
        title = f"`{path}`" if path else "Top level"
        out.append(f"## {title} {{#{anchors[cls]}}}\n")
        text = doc(cls)
        if text:
            out.append(text + "\n")
        comments = class_field_comments(cls)
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            rows.append(
                [
                    code(f.name),
                    _settings_type(hints[f.name], anchors),
                    _settings_default(f),
                    _bounds(f.metadata.get("bounds", {})) or "—",
                    cell(comments.get(f.name, "")),
                ]
            )
        out.append(table(["Field", "Type", "Default", "Bounds", "What it is"], rows))
    return "\n".join(out)


# ---------------------------------------------------------------- the scenario file


def _value_types() -> list[tuple[int, str, str]]:
    """The scenario schema's named value types (``Duration = Annotated[float, ...]`` ...): the
    id of the validator that marks a field declared with one, its word here, and how it is
    written (the parser's own docstring where it has one)."""
    from apps.scenario import schema

    found = []
    for name, value in vars(schema).items():
        if typing.get_origin(value) is typing.Annotated and value.__metadata__:
            marker = value.__metadata__[0]
            word, how = VALUE_TYPES.get(name, (name.lower(), ""))
            parser = getattr(marker, "func", None)
            if getattr(parser, "__name__", "<lambda>") != "<lambda>" and doc(parser):
                how = doc(parser)
            found.append((id(marker), word, how))
    return found


# the scenario schema's named value types: what each is called here and how it is written
# where its parser does not say (a lambda, a check without a docstring)
VALUE_TYPES = {
    "Duration": ("duration", "`10ms`, `2s`, `1m`; a bare number is seconds"),
    "Probability": ("probability", "`5%` or `0.05`"),
    "Rate": ("rate", "`10Mbit`, `500kbit`, `1Gbps`: bits per second"),
    "Prefix": ("name prefix", "an NDN name in URI form, e.g. `/app/data`"),
    "Identifier": (
        "identifier",
        "a letter, then letters, digits, `-` or `_`, 32 at most (they end up in file and "
        "namespace names)",
    ),
    "LinkRef": ("link", "the two nodes it joins: `a-b` or `[a, b]`"),
}


def _constraints(metadata: list[Any]) -> str:
    words = (
        ("ge", "≥ {}"),
        ("gt", "> {}"),
        ("le", "≤ {}"),
        ("lt", "< {}"),
        ("min_length", "length ≥ {}"),
        ("max_length", "length ≤ {}"),
    )
    found = []
    for m in metadata:
        for attr, fmt in words:
            value = getattr(m, attr, None)
            if value is not None:
                found.append(
                    fmt.format(_number(value) if attr in ("ge", "gt", "le", "lt") else value)
                )
    return ", ".join(found)


def _model_type(
    tp: Any, metadata: list[Any], labels: dict[int, str], anchors: dict[type, str]
) -> str:
    for m in metadata:
        if id(m) in labels:
            return labels[id(m)]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _model_type(args[0], list(tp.__metadata__), labels, anchors)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        text = " or ".join(_model_type(a, [], labels, anchors) for a in rest)
        return f"{text} or `null`" if len(rest) < len(args) else text
    if origin is Literal:
        return _literal(args)
    if origin is list:
        return f"list of {_model_type(args[0], [], labels, anchors)}"
    if origin is dict:
        key, value = (_model_type(a, [], labels, anchors) for a in args)
        return f"mapping of {key} to {value}"
    if origin is tuple:
        return "[" + ", ".join(_model_type(a, [], labels, anchors) for a in args) + "]"
    if isinstance(tp, type) and tp in anchors:
        return f"[section](#{anchors[tp]})"
    if tp in PRIMITIVES:
        return PRIMITIVES[tp]
    if tp is Any:
        return "any value"
    return code(getattr(tp, "__name__", repr(tp)))


CONTAINER_SUFFIX: dict[Any, str] = {list: "[]", dict: ".<name>"}


def _models(root: type[BaseModel], path: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """``root`` and every model its fields hold, with the YAML path that reaches each."""
    yield path, root
    for name, f in root.model_fields.items():
        key = f.alias or name
        stack: list[Any] = [f.annotation]
        while stack:
            t = stack.pop()
            origin = typing.get_origin(t)
            if isinstance(t, type) and issubclass(t, BaseModel):
                # a list or a mapping of the model (or one of them or null): [] or .<name>
                suffix = ""
                for a in (f.annotation, *typing.get_args(f.annotation)):
                    suffix = suffix or CONTAINER_SUFFIX.get(typing.get_origin(a), "")
                sub = f"{path}.{key}" if path else key
                yield from _models(t, sub + suffix)
            elif origin is not None:
                stack += list(typing.get_args(t))


def _model_default(f: FieldInfo, is_duration: bool) -> str:
    if f.is_required():
        return "**required**"
    value = f.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its section's defaults"
    if is_duration and isinstance(value, int | float) and not isinstance(value, bool):
        return code(f"{value:g}s")
    if is_duration and isinstance(value, tuple):
        return code("[" + ", ".join(f"{v:g}s" for v in value) + "]")
    return _scalar(value)


def scenario_fields() -> list[str]:
    """The top-level fields of a scenario file, as written in it."""
    from apps.scenario.schema import Scenario

    return [f.alias or name for name, f in Scenario.model_fields.items()]


def scenario_schema_page() -> str:
    from apps.scenario.schema import Scenario

    value_types = _value_types()
    labels = {marker: f"[{word}](#value-types)" for marker, word, _how in value_types}
    sections: list[tuple[str, type[BaseModel]]] = []
    seen: set[type] = set()
    for path, model in _models(Scenario):
        if model not in seen:
            seen.add(model)
            sections.append((path, model))
    anchors = {model: _anchor(path) for path, model in sections}
    out = [
        "# Scenario files\n",
        "What `icn scenario run FILE` (and `check`) reads: every section and field of a "
        "scenario YAML file, generated when the site is built from the pydantic models the "
        "loader checks files with (`apps/scenario/schema.py`). Every model forbids unknown "
        "fields, so a typo is reported (with its line and the closest valid name) instead of "
        "ignored. Checks that span sections (a link to a node that does not exist, a fault "
        "after the end of the run...) are made after these, and name the field at fault too. "
        "The [scenarios guide](../guides/scenarios.md) and the "
        "[first scenario tutorial](../tutorials/first-scenario.md) show them at work.\n",
    ]
    out.append("## Value types {#value-types}\n")
    out.append(
        table(
            ["Type", "How it is written"],
            [[word, cell(how)] for _marker, word, how in value_types],
        )
    )
    for path, model in sections:
        title = f"`{path}`" if path else "Top level"
        out.append(f"## {title} {{#{anchors[model]}}}\n")
        text = doc(model)
        if text:
            out.append(text + "\n")
        comments = class_field_comments(model)
        rows = []
        for name, f in model.model_fields.items():
            kind = _model_type(f.annotation, list(f.metadata), labels, anchors)
            rows.append(
                [
                    code(f.alias or name),
                    kind,
                    _model_default(f, "[duration]" in kind),
                    _constraints(list(f.metadata)) or "—",
                    cell(f.description or comments.get(name, "")),
                ]
            )
        out.append(table(["Field", "Type", "Default", "Bounds", "What it is"], rows))
    return "\n".join(out)


PAGES: dict[str, Callable[[], str]] = {
    "reference/forwarder-config.md": forwarder_config_page,
    "reference/scenario-schema.md": scenario_schema_page,
}
