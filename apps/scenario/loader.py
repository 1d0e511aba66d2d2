"""Read a scenario file, validate it, and explain every mistake with its line.

All problems are collected before anything starts: pydantic's (types, units, unknown fields,
missing fields), cross-section references (:func:`schema.reference_errors`), duplicate YAML keys,
and entry points that cannot be imported.  Each is reported as ``FILE:LINE: path: message``.
"""

from __future__ import annotations

import difflib
import importlib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from apps.scenario.schema import Loc, Scenario, reference_errors
from icn.errors import ConfigError


@dataclass(frozen=True)
class Problem:
    """``file``: where the mistake is when not in the scenario file (its topology file)."""

    loc: Loc
    message: str
    line: int | None = None
    file: str | None = None

    def format(self, source: str) -> str:
        where = f"{self.file or source}:{self.line}" if self.line else self.file or source
        if self.file is not None:  # the message says where in that file
            return f"{where}: {self.message}"
        return f"{where}: {format_loc(self.loc) or '(top level)'}: {self.message}"


class ScenarioError(ConfigError):
    """A scenario file that cannot run; ``problems`` lists every mistake found."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        lines = [p.format(source) for p in problems]
        head = f"{source}: {len(problems)} problem{'s' if len(problems) != 1 else ''}"
        super().__init__("\n".join([head, *("  " + ln for ln in lines)]))


def format_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# ---- YAML with positions -----------------------------------------------------------------


def _compose(text: str, source: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(source, [Problem((), f"not valid YAML: {problem}", line)]) from None


def _node_at(root: yaml.Node | None, loc: Loc) -> tuple[yaml.Node | None, int | None]:
    """The YAML node at ``loc`` (as far as it exists) and the line to point at."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    node, line = value, key.start_mark.line + 1
                    break
            else:
                continue  # a pydantic-only path element (a union branch...): skip it
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if 0 <= part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
        else:
            break
    return node, line


def _duplicate_keys(node: yaml.Node | None, loc: Loc = ()) -> list[Problem]:
    found: list[Problem] = []
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            k = str(key.value)
            if k in seen:
                found.append(
                    Problem((*loc, k), "appears twice in the same mapping", key.start_mark.line + 1)
                )
            seen.add(k)
            found += _duplicate_keys(value, (*loc, k))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += _duplicate_keys(item, (*loc, i))
    return found


# ---- explaining pydantic errors ----------------------------------------------------------


def _unwrap(tp: Any) -> list[Any]:
    """The candidate types behind an annotation (Optional, Union and Annotated opened)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg)]
    return [tp]


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model whose field ``loc[-1]`` is, following the annotations."""
    current: list[Any] = [Scenario]
    for part in loc[:-1]:
        nxt: list[Any] = []
        for tp in current:
            origin = typing.get_origin(tp)
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                field = tp.model_fields.get(str(part))
                if field is not None:
                    nxt += _unwrap(field.annotation)
            elif origin in (list, tuple) and isinstance(part, int):
                nxt += _unwrap(typing.get_args(tp)[0])
            elif origin is dict:
                nxt += _unwrap(typing.get_args(tp)[1])
        if nxt:
            current = nxt
    for tp in current:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
    return None


def _explain(err: Any) -> str:
    kind, loc = err["type"], tuple(err["loc"])
    if kind == "extra_forbidden":
        model = _model_at(loc)
        fields = sorted(model.model_fields) if model else []
        hint = difflib.get_close_matches(str(loc[-1]), fields, n=1)
        msg = f"unknown field {loc[-1]!r}"
        if hint:
            msg += f"; did you mean {hint[0]!r}?"
        if fields:
            msg += f" (valid here: {', '.join(fields)})"
        return msg
    if kind == "missing":
        return f"missing required field {loc[-1]!r}"
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if kind not in ("value_error", "missing") and "input" in err:
        msg += f" (got {err['input']!r})"
    return msg


def _clean_loc(loc: Loc) -> Loc:
    """Drop pydantic's union-branch and validator tags (``list[RouteSpec]``, ``function-...``)."""
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and "-" not in p[:9]))


def _pydantic_problems(exc: ValidationError, data: Any, root: yaml.Node | None) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[Loc, str]] = set()
    errors = exc.errors()
    for err in errors:
        raw = tuple(err["loc"])
        # For `routes: auto | [...]`, report only the branch that matches what was written.
        if raw and raw[0] == "routes" and len(raw) > 1 and isinstance(raw[1], str):
            written_list = isinstance(data, dict) and isinstance(data.get("routes"), list)
            if written_list != raw[1].startswith("list["):
                continue
        loc = _clean_loc(raw)
        msg = _explain({**err, "loc": loc or raw})
        if (loc, msg) in seen:
            continue
        seen.add((loc, msg))
        problems.append(Problem(loc, msg, _node_at(root, loc)[1]))
    return problems


# ---- a topology file ----------------------------------------------------------------------


def _with_topology(
    data: dict[str, Any], root: yaml.Node | None, source: str
) -> tuple[dict[str, Any], list[Problem]]:
    """``data`` with the nodes and links of the graph file ``topology:`` names, relative to
    the scenario file's directory (unchanged without one)."""
    name = data.get("topology")
    if not isinstance(name, str):
        return data, []  # none, or not a path: the schema says so
    from apps.scenario.topology_file import (
        TopologyFileError,
        format_problem,
        read_topology,
        with_file_topology,
    )

    path = Path(source).parent / name
    try:
        topo = read_topology(path)
    except TopologyFileError as exc:
        where = _node_at(root, ("topology",))[1]
        return data, [
            Problem(("topology",), f"{exc.path}: {format_problem(p)}", where)
            if p.line is None
            else Problem((), format_problem(p), p.line, exc.path)
            for p in exc.problems
        ]
    merged, errors = with_file_topology(data, topo, str(path))
    return merged, [Problem(loc, msg, _node_at(root, loc)[1]) for loc, msg in errors]


# ---- entry points ------------------------------------------------------------------------


def entry_problems(sc: Scenario) -> list[Problem]:
    """Services and workloads whose ``module:function`` cannot be imported."""
    problems: list[Problem] = []
    for section in ("services", "workloads"):
        for i, proc in enumerate(getattr(sc, section)):
            module_name, _, attr = proc.entry.partition(":")
            loc: Loc = (section, i, "entry")
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:
                problems.append(Problem(loc, f"cannot import {module_name}: {exc}"))
                continue
            if not callable(getattr(module, attr, None)):
                problems.append(Problem(loc, f"{module_name} has no function {attr!r}"))
    return problems


# ---- the entry point -----------------------------------------------------------------------


def parse_scenario(text: str, source: str = "<scenario>", check_entries: bool = True) -> Scenario:
    """Validate scenario text; ScenarioError lists every problem with its line."""
    root = _compose(text, source)
    data = yaml.safe_load(text) if root is not None else None
    if not isinstance(data, dict):
        raise ScenarioError(
            source,
            [Problem((), "the top level must be a mapping with name, nodes, links...", 1)],
        )
    problems = _duplicate_keys(root)
    data, topology_problems = _with_topology(data, root, source)
    if topology_problems:
        raise ScenarioError(source, problems + topology_problems)
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(source, problems + _pydantic_problems(exc, data, root)) from None
    problems += [Problem(loc, msg) for loc, msg in reference_errors(sc)]
    if check_entries:
        problems += entry_problems(sc)
    problems = [
        p if p.line is not None else Problem(p.loc, p.message, _node_at(root, p.loc)[1])
        for p in problems
    ]
    if problems:
        raise ScenarioError(source, problems)
    return with_identities(with_chaos(sc, source, root))


def with_identities(sc: Scenario) -> Scenario:
    """With a ``trust`` block, each process that serves (a service, or a workload that
    announces) announces its identity too, so that routes reach the certificate it serves."""
    if sc.trust is None:
        return sc
    from apps.scenario.trust import identity_name

    def more(procs: list[Any], services: bool) -> list[Any]:
        out = []
        for proc in procs:
            ident = identity_name(sc, proc.name)
            if (services or proc.announce) and ident not in proc.announce:
                proc = proc.model_copy(update={"announce": [*proc.announce, ident]})
            out.append(proc)
        return out

    return sc.model_copy(
        update={"services": more(sc.services, True), "workloads": more(sc.workloads, False)}
    )


def with_chaos(sc: Scenario, source: str, root: yaml.Node | None = None) -> Scenario:
    """``sc`` with the faults its chaos block draws appended (the block stays, for the plan)."""
    if sc.chaos is None:
        return sc
    from apps.scenario.chaos import chaos_faults

    drawn = chaos_faults(sc)
    if not drawn:
        end = sc.duration if sc.chaos.end is None else sc.chaos.end
        raise ScenarioError(
            source,
            [
                Problem(
                    ("chaos",),
                    f"seed {sc.chaos.seed} draws no episode between start ({sc.chaos.start:g}s) "
                    f"and end ({end:g}s); shorten interval or down_for, or widen the span",
                    _node_at(root, ("chaos",))[1],
                )
            ],
        )
    return sc.model_copy(update={"faults": [*sc.faults, *drawn]})


def load_scenario(path: str | Path, check_entries: bool = True) -> Scenario:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ScenarioError(
            str(p), [Problem((), f"cannot read the file: {exc.strerror}")]
        ) from None
    return parse_scenario(text, str(p), check_entries)
