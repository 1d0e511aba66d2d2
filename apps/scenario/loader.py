"""Read a scenario file, validate it, and explain every mistake with its line.

All problems are collected before anything starts: pydantic's (types, units, unknown fields,
missing fields), cross-section references (:func:`schema.reference_errors`), duplicate YAML keys,
and entry points that cannot be imported.  Each is reported as ``FILE:LINE:COL: path: message``
by the formatter the forwarder's config and stream graphs share (:mod:`icn.problems`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from apps.scenario.schema import Loc, Scenario, reference_errors
from icn.problems import (
    NotYaml,
    Problem,
    ProblemsError,
    YamlDocument,
    format_loc,
    parse_yaml,
    validation_problems,
)

__all__ = ["Problem", "ScenarioError", "format_loc", "load_scenario", "parse_scenario"]


class ScenarioError(ProblemsError):
    """A scenario file that cannot run; ``problems`` lists every mistake found."""


def _pydantic_problems(exc: ValidationError, data: Any) -> list[Problem]:
    errors = []
    for err in exc.errors():
        raw = tuple(err["loc"])
        # For `routes: auto | [...]`, report only the branch that matches what was written.
        if raw and raw[0] == "routes" and len(raw) > 1 and isinstance(raw[1], str):
            written_list = isinstance(data, dict) and isinstance(data.get("routes"), list)
            if written_list != raw[1].startswith("list["):
                continue
        errors.append(err)
    return validation_problems(errors, Scenario)


# ---- a topology file ----------------------------------------------------------------------


def _with_topology(
    data: dict[str, Any], doc: YamlDocument, source: str
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
        return data, [
            Problem(("topology",), f"{exc.path}: {format_problem(p)}")
            if p.line is None
            else Problem((), format_problem(p), p.line, file=exc.path)
            for p in exc.problems
        ]
    merged, errors = with_file_topology(data, topo, str(path))
    return merged, [Problem(loc, msg) for loc, msg in errors]


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
    try:
        doc = parse_yaml(text)
    except NotYaml as exc:
        raise ScenarioError(source, [exc.problem]) from None
    data = doc.data
    if not isinstance(data, dict):
        raise ScenarioError(
            source,
            [Problem((), "the top level must be a mapping with name, nodes, links...", 1, 1)],
        )
    problems = doc.duplicate_keys()
    data, topology_problems = _with_topology(data, doc, source)
    if topology_problems:
        raise ScenarioError(source, doc.locate(problems + topology_problems))
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as exc:
        problems += _pydantic_problems(exc, data)
        raise ScenarioError(source, doc.locate(problems)) from None
    problems += [Problem(loc, msg) for loc, msg in reference_errors(sc)]
    if check_entries:
        problems += entry_problems(sc)
    if problems:
        raise ScenarioError(source, doc.locate(problems))
    return with_identities(with_chaos(sc, source, doc))


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


def with_chaos(sc: Scenario, source: str, doc: YamlDocument | None = None) -> Scenario:
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
                    *(doc.position(("chaos",)) if doc is not None else ()),
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
            str(p), [Problem((), f"cannot read the file: {exc.strerror}", file=str(p))]
        ) from None
    return parse_scenario(text, str(p), check_entries)
