"""Mistakes in a file people write, each told with where it is and the fix.

The one error formatter of the project's loaders: the forwarder's config
(:mod:`forwarder.config`), stream graphs (:mod:`compute.stream.graph`) and scenarios
(:mod:`apps.scenario.loader`) all report every problem they find at once, each as::

    FILE:LINE:COL: field.path: message

e.g. ``fwd.yaml:4:3: tables.pit_max_entrys: unknown field 'pit_max_entrys' (did you mean
'pit_max_entries'? valid fields: cs_max_bytes, ...)``.  A loader collects :class:`Problem` s with
their path in the data (``("links", 0, "delay")``), finds each one's line and column in the YAML
it read (:class:`YamlDocument`), and raises a :class:`ProblemsError` listing them.

What turns a checker's verdict into a problem is here too: :func:`explain` for one error
(unknown field with did-you-mean and the valid fields, missing field, wrong type or value with
what was written) and :func:`validation_problems` for the errors of a pydantic validation or of
:mod:`forwarder.schema` (its problems in the same form).  The valid fields at a path are read from
the classes that check the data (pydantic models or dataclasses), following their annotations.

Nothing here imports YAML or pydantic at import time: the forwarder imports this module, and an
idle daemon started with flags or a JSON config loads neither (issue 23).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from icn.errors import ConfigError

if TYPE_CHECKING:
    import yaml

Loc = tuple[str | int, ...]


def format_loc(loc: Loc) -> str:
    """``links[0].between[1]``: fields joined by dots, list positions in brackets."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class Problem:
    """One mistake: its path in the data, what is wrong and what to do, its line and column
    in the file (1-based; None when unknown).  ``file``: the mistake is in another file than
    the one checked (a scenario's topology file), whose name then replaces the checked one's and
    whose message says where in it."""

    loc: Loc
    message: str
    line: int | None = None
    column: int | None = None
    file: str | None = None

    @property
    def text(self) -> str:
        """``field.path: message``, without the file (to quote inside another message)."""
        if self.file is not None:
            return self.message
        return f"{format_loc(self.loc) or '(top level)'}: {self.message}"

    def format(self, source: str) -> str:
        """``FILE:LINE:COL: field.path: message``; the line and column when known."""
        where = self.file or source
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.text}"


class ProblemsError(ConfigError):
    """A file that cannot be used; ``problems`` lists every mistake found, one per line."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        # in the order of the file, as a compiler lists them; those with no line after
        self.problems = sorted(
            problems, key=lambda p: (p.file is not None, p.line is None, p.line or 0, p.column or 0)
        )
        n = len(self.problems)
        head = f"{source}: {n} problem{'s' if n != 1 else ''}"
        super().__init__("\n".join([head, *("  " + p.format(source) for p in self.problems)]))


class NestedProblems(ValueError):
    """The problems a checker found in a value that a pydantic validator hands it (a scenario
    node's ``forwarder:`` settings, checked by the forwarder's own config checker): pydantic
    reports it at the validator's field, and :func:`validation_problems` puts each problem back
    under that field (``nodes.a.forwarder.tables.cs_max_entrys``), at its own line."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(p.text for p in self.problems))


# ---- YAML with positions ----------------------------------------------------------------------


class NotYaml(ConfigError):
    """The text does not parse as YAML; ``problem`` says where and why."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        where = f"line {problem.line}, column {problem.column}: " if problem.line else ""
        super().__init__(where + problem.message)


@dataclass(frozen=True)
class YamlDocument:
    """A YAML text's data and its node tree, which knows where each value was written."""

    data: Any
    root: yaml.Node | None

    def position(self, loc: Loc) -> tuple[int | None, int | None]:
        """The line and column of the value at ``loc``: of its key in a mapping, of the item in
        a list.  A path element the file does not have (a default, a pydantic union tag) is
        skipped, so a missing field points at the mapping it is missing from; a list index past
        the end of the file's list has no position (the value did not come from this file)."""
        node = self.root
        if node is None:
            return None, None
        mark = node.start_mark
        for part in loc:
            if isinstance(node, _mapping_node()):
                for key, value in node.value:
                    if key.value == str(part):
                        node, mark = value, key.start_mark
                        break
                # else: not written here (a default or a pydantic path element): skip it
            elif isinstance(node, _sequence_node()) and isinstance(part, int):
                if not 0 <= part < len(node.value):
                    return None, None
                node = node.value[part]
                mark = node.start_mark
            else:
                break
        return mark.line + 1, mark.column + 1

    def locate(self, problems: Iterable[Problem]) -> list[Problem]:
        """``problems``, each without a line given the line and column of its path."""
        out = []
        for p in problems:
            if p.line is None and p.file is None:
                line, column = self.position(p.loc)
                p = dataclasses.replace(p, line=line, column=column)
            out.append(p)
        return out

    def duplicate_keys(self) -> list[Problem]:
        """A key written twice in one mapping (YAML keeps the last silently): one problem at
        each repetition, naming the line of the first."""
        found: list[Problem] = []

        def walk(node: yaml.Node | None, loc: Loc) -> None:
            if isinstance(node, _mapping_node()):
                first: dict[str, int] = {}
                for key, value in node.value:
                    k = str(key.value)
                    if k in first:
                        found.append(
                            Problem(
                                (*loc, k),
                                f"appears twice in the same mapping (first at line {first[k]}); "
                                "keep one",
                                key.start_mark.line + 1,
                                key.start_mark.column + 1,
                            )
                        )
                    else:
                        first[k] = key.start_mark.line + 1
                    walk(value, (*loc, k))
            elif isinstance(node, _sequence_node()):
                for i, item in enumerate(node.value):
                    walk(item, (*loc, i))

        walk(self.root, ())
        return found


def _mapping_node() -> type[yaml.MappingNode]:
    import yaml

    return yaml.MappingNode


def _sequence_node() -> type[yaml.SequenceNode]:
    import yaml

    return yaml.SequenceNode


def parse_yaml(text: str) -> YamlDocument:
    """The data of ``text`` (safe YAML: plain types only) with its positions; :class:`NotYaml`
    with the line and column of the first syntax error."""
    import yaml  # here: a daemon started with flags or a JSON config reads no YAML (issue 23)

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        # parsed again, not constructed from ``root``: constructing merges ``<<: *anchor`` keys
        # into the nodes, which would then hold the anchor's keys (at the anchor's lines) beside
        # the ones written there
        data = yaml.safe_load(text) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        what = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        if context:
            what += f" ({context})"
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        raise NotYaml(Problem((), f"not valid YAML: {what}", line, column)) from None
    return YamlDocument(data, root)


# ---- explaining a checker's errors -----------------------------------------------------------


def did_you_mean(word: str, valid: Sequence[str], what: str = "fields") -> str:
    """`` (did you mean 'x'? valid fields: a, b, c)``, or without the guess when none is close."""
    import difflib

    if not valid:
        return ""
    close = difflib.get_close_matches(word, list(valid), n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return f" ({guess}valid {what}: {', '.join(valid)})"


def explain(
    kind: str,
    loc: Loc,
    message: str,
    value: object = None,
    *,
    has_value: bool = True,
    fields: Sequence[str] = (),
    choices: Sequence[str] = (),
) -> str:
    """The message of one checker error, in pydantic's terms: ``kind`` ``extra_forbidden`` (an
    unknown field, ``loc[-1]``; ``fields`` are those valid there), ``missing``, ``value_error``
    (a check's own message, which says what to write) or another (a wrong type or bound, told
    with the value written, and the closest of ``choices``, a Literal's values, to a word)."""
    if kind == "extra_forbidden":
        return f"unknown field {str(loc[-1])!r}" + did_you_mean(str(loc[-1]), fields)
    if kind == "missing":
        return f"missing required field {str(loc[-1])!r}"
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind not in ("value_error", "assertion_error") and has_value:
        guess = ""
        if isinstance(value, str) and choices:
            import difflib

            close = difflib.get_close_matches(value, list(choices), n=1)
            guess = f"; did you mean {close[0]!r}?" if close else ""
        message += f" (got {value!r}{guess})"
    return message


def validation_problems(errors: Iterable[Mapping[str, Any]], model: Any) -> list[Problem]:
    """Problems from a checker's errors, each a mapping as pydantic's ``ValidationError.errors()``
    gives (``type``, ``loc``, ``msg``, ``input``, ``ctx``), checked against ``model`` (a pydantic
    model or dataclass): the path cleaned of pydantic's own elements (union tags, validator
    names), unknown fields with the valid ones, a bad or missing discriminator (``type:``) with
    the valid values.  The same problem reported twice (by two union branches) is kept once."""
    problems: list[Problem] = []
    seen: set[tuple[Loc, str]] = set()
    for err in errors:
        kind = str(err["type"])
        walk = _walk(model, tuple(err["loc"]), keep_last=kind in ("extra_forbidden", "missing"))
        loc, message = walk.loc, ""
        nested = (err.get("ctx") or {}).get("error")
        if isinstance(nested, NestedProblems):
            for p in nested.problems:
                key = ((*loc, *p.loc), p.message)
                if key not in seen:
                    seen.add(key)
                    problems.append(Problem(*key))
            continue
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            disc = str((err.get("ctx") or {}).get("discriminator", "type")).strip("'\"")
            loc = (*loc, disc)
            tags = walk.tags(disc)
            if kind == "union_tag_invalid":
                tag = str((err.get("ctx") or {}).get("tag", err.get("input")))
                message = f"unknown {disc} {tag!r}" + did_you_mean(tag, tags, f"{disc}s")
            else:
                message = f"missing required field {disc!r}"
                if tags:
                    message += f" (one of: {', '.join(tags)})"
        else:
            message = explain(
                kind,
                loc or tuple(err["loc"]),
                str(err["msg"]),
                err.get("input"),
                has_value="input" in err,
                fields=walk.fields(),
                choices=walk.choices(),
            )
        if (loc, message) in seen:
            continue
        seen.add((loc, message))
        problems.append(Problem(loc, message))
    return problems


@dataclass
class _Walked:
    """Where a path leads in the checking classes: the path as the user wrote it, the
    candidate types of its parent and of the value at it (several for a union)."""

    loc: Loc
    parents: list[Any]
    at: list[Any]

    def fields(self) -> list[str]:
        for tp in self.parents:
            fields = _fields(tp)
            if fields is not None:
                return sorted(fields)
        return []

    def choices(self) -> list[str]:
        """The values a Literal at the path allows (words only: what a typo is made of)."""
        return [
            a
            for tp in self.at
            if typing.get_origin(tp) is Literal
            for a in typing.get_args(tp)
            if isinstance(a, str)
        ]

    def tags(self, disc: str) -> list[str]:
        """The values of the discriminator field ``disc`` among the candidates at the path."""
        out: list[str] = []
        for tp in self.at:
            ann = (_fields(tp) or {}).get(disc)
            if typing.get_origin(ann) is Literal:
                out += [str(a) for a in typing.get_args(ann) if str(a) not in out]
        return out


def _walk(model: Any, raw: Loc, keep_last: bool) -> _Walked:
    """Follow ``raw`` (a checker's path) through the annotations from ``model``, keeping the
    elements the user wrote (fields, list positions, mapping keys) and dropping pydantic's own
    (a union branch's tag such as ``list[RouteSpec]`` or ``map``, a validator's name, ``[key]``).
    The last element is kept when it is a field not in the model (an unknown or missing one)."""
    current: list[Any] = [model]
    parents: list[Any] = current
    loc: list[str | int] = []
    for i, part in enumerate(raw):
        last = i == len(raw) - 1
        nxt: list[Any] = []
        for tp in current:
            fields = _fields(tp)
            origin, args = typing.get_origin(tp), typing.get_args(tp)
            if fields is not None:
                if isinstance(part, str) and part in fields:
                    nxt += _unwrap(fields[part])
            elif origin in (list, tuple, set, frozenset) and isinstance(part, int):
                nxt += _unwrap(args[0]) if args else [Any]
            elif origin in (dict, Mapping) and isinstance(part, str):
                nxt += _unwrap(args[1]) if len(args) == 2 else [Any]
            elif tp is Any or tp is dict or tp is list:
                nxt.append(Any)  # untyped: take the path as written
        if nxt:
            loc.append(part)
            parents, current = current, nxt
            continue
        tagged = [tp for tp in current if isinstance(part, str) and _has_tag(tp, part)]
        if tagged:  # a discriminated union's branch: follow it, the user did not write it
            current = tagged
            continue
        if last and keep_last:
            loc.append(part)
            parents = current
        elif isinstance(part, int) or not _is_pydantic_element(part):
            loc.append(part)  # not in the annotations but not pydantic's: keep what was said
            parents, current = current, [Any]
    return _Walked(tuple(loc), [tp for tp in parents if tp is not Any], current)


def _is_pydantic_element(part: str) -> bool:
    """pydantic's own path elements: a union branch (``list[RouteSpec]``, ``literal['auto']``),
    a validator (``function-after[...]``), a mapping key's check (``[key]``)."""
    return "[" in part or part.startswith(("function-", "lax-", "strict-", "json-or-python"))


def _has_tag(tp: Any, tag: str) -> bool:
    """Whether ``tp`` is a model with a Literal field that allows ``tag`` (its discriminator)."""
    for ann in (_fields(tp) or {}).values():
        if typing.get_origin(ann) is Literal and tag in [str(a) for a in typing.get_args(ann)]:
            return True
    return False


def _fields(tp: Any) -> dict[str, Any] | None:
    """A checking class's fields and their annotations: a pydantic model's (read without
    importing pydantic) or a dataclass's; None for any other type."""
    model_fields = getattr(tp, "model_fields", None) if isinstance(tp, type) else None
    if isinstance(model_fields, dict):
        return {name: f.annotation for name, f in model_fields.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return typing.get_type_hints(tp)
    return None


def _unwrap(tp: Any) -> list[Any]:
    """The candidate types behind an annotation (Optional, Union and Annotated opened)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg) if t is not type(None)]
    return [tp]
