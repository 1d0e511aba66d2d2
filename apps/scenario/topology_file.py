"""``topology:`` in a scenario: its nodes and links read from a graph file (GraphML, GML or an
edge list, as networkx reads them), checked by the rules of nodes and links written in YAML.

An edge is a link; its attributes are the fields of a link in YAML (:class:`LinkSpec`:
``transport``, ``delay``, ``jitter``, ``loss``, ``rate``, ``cost``, ``seed``), with the same
units (``2ms``, ``100Mbit``, ``1%``; a bare number is seconds, bits/s or a fraction).  A node's
attributes are ``cs_capacity``, ``strategy`` and ``forwarder.<path>`` (one forwarder setting:
``forwarder.tables.pit_max_entries``).  ``label``, ``x``, ``y``, ``lat`` and ``lon`` (a node's)
and ``label`` (an edge's) say where a map draws them and are not read.  Any other attribute is
refused, as a misspelt field in YAML is.  Every mistake is reported with its line in the file.

The scenario's own ``nodes:`` may add settings to nodes of the file (its fields win over the
file's; ``forwarder`` settings merge); a node it names that the file lacks is an error, and
``links:`` cannot be given beside ``topology:``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from apps.scenario.edgelist import read_edgelist
from apps.scenario.gml import read_gml
from apps.scenario.graph_records import Attr, FileProblem, GraphFormatError, RawGraph, RawNode
from apps.scenario.graphml import read_graphml
from apps.scenario.schema import Identifier, LinkSpec, Loc, NodeSpec
from icn.errors import ConfigError

READERS: dict[str, Callable[[bytes], RawGraph]] = {
    ".graphml": read_graphml,
    ".gml": read_gml,
    ".edgelist": read_edgelist,
    ".edges": read_edgelist,
}
LINK_ATTRS = tuple(f for f in LinkSpec.model_fields if f != "between")
NODE_ATTRS = ("cs_capacity", "strategy")
FORWARDER = "forwarder."
# where a map draws a node or an edge: allowed, not read
NODE_DRAWING = ("label", "x", "y", "lat", "lon")
EDGE_DRAWING = ("label",)

# what other tools call a link's fields
SYNONYMS = {"weight": "cost", "latency": "delay", "bandwidth": "rate", "capacity": "rate"}

NODE_VALID = [*NODE_ATTRS, f"{FORWARDER}<setting>", *NODE_DRAWING]
EDGE_VALID = [*LINK_ATTRS, *EDGE_DRAWING]

_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)


@dataclass(frozen=True)
class FileTopology:
    """``nodes``: each node's NodeSpec fields as the file sets them, in file order."""

    nodes: dict[str, dict[str, Any]]
    links: list[LinkSpec]


class TopologyFileError(ConfigError):
    def __init__(self, path: str, problems: list[FileProblem]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"  {path}{f':{p.line}' if p.line else ''}: {format_problem(p)}" for p in problems]
        super().__init__("\n".join([f"{path}: {len(problems)} problem(s)", *lines]))


def format_problem(p: FileProblem) -> str:
    """``edge a-b: delay: 'fast' is not a duration...``"""
    return ": ".join(part for part in (p.where, p.attr, p.message) if part)


def read_topology(path: Path) -> FileTopology:
    """The nodes and links of a graph file; TopologyFileError lists every mistake."""
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise TopologyFileError(
            str(path),
            [
                FileProblem(
                    None,
                    "",
                    f"{path.suffix or 'no suffix'}: not a graph format read here; name the "
                    "file .graphml (GraphML), .gml (GML) or .edgelist (an edge list)",
                )
            ],
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TopologyFileError(
            str(path), [FileProblem(None, "", f"cannot read the file: {exc.strerror}")]
        ) from None
    try:
        raw = reader(data)
    except GraphFormatError as exc:
        raise TopologyFileError(str(path), [exc.problem]) from None
    topo, problems = check_graph(raw)
    if problems:
        raise TopologyFileError(str(path), problems)
    return topo


def check_graph(raw: RawGraph) -> tuple[FileTopology, list[FileProblem]]:
    """Names, attributes and links by the scenario's rules, every problem with its line."""
    problems = list(raw.problems)
    unknown = _Unknowns(raw.declared)
    nodes: dict[str, dict[str, Any]] = {}
    declared: dict[str, int] = {}
    if raw.declares_nodes:
        listed = raw.nodes
    else:  # an edge list: its nodes are the ends of its edges, met at their first line
        firsts: dict[str, RawNode] = {}
        for e in raw.edges:
            for end in (e.source, e.target):
                firsts.setdefault(end, RawNode(end, e.line, {}))
        listed = list(firsts.values())
    for node in listed:
        where = f"node {node.name}"
        if node.name in declared:
            problems.append(
                FileProblem(
                    node.line,
                    where,
                    f"already declared at line {declared[node.name]}; give each node its own name",
                )
            )
            continue
        declared[node.name] = node.line
        try:
            _IDENTIFIER.validate_python(node.name)
        except ValidationError as exc:
            problems.append(
                FileProblem(node.line, where, f"{_explain(exc.errors()[0])}; rename it in the file")
            )
            continue
        fields, node_problems = _node_fields(node.attrs, where, unknown)
        problems += node_problems
        nodes[node.name] = fields
    links: list[LinkSpec] = []
    linked: dict[frozenset[str], int] = {}
    for e in raw.edges:
        where = f"edge {e.source}-{e.target}"
        missing = [n for n in (e.source, e.target) if n not in declared]
        for n in missing:
            problems.append(
                FileProblem(
                    e.line, where, f"no node {n!r} in this file; declare it or fix the edge's end"
                )
            )
        if missing:
            continue
        pair = frozenset((e.source, e.target))
        if pair in linked and len(pair) == 2:
            problems.append(
                FileProblem(
                    e.line,
                    where,
                    f"{e.source} and {e.target} are already linked at line {linked[pair]} (a "
                    "link carries both directions); keep one edge",
                )
            )
            continue
        linked.setdefault(pair, e.line)
        link, link_problems = _link(e.source, e.target, e.line, e.attrs, where, unknown)
        problems += link_problems
        if link is not None:
            links.append(link)
    problems += unknown.problems()
    if not listed and not problems:
        problems.append(FileProblem(None, "", "the graph has no nodes; add nodes and edges"))
    problems.sort(key=lambda p: p.line or 0)
    return FileTopology(nodes, links), problems


class _Unknowns:
    """Unknown attributes, each reported once: at its GraphML key, else at its first use
    with the lines of the others."""

    def __init__(self, declared: dict[tuple[str, str], tuple[int, str]]) -> None:
        self.declared = declared
        self.uses: dict[tuple[str, str], list[tuple[int, str]]] = {}

    def add(self, kind: str, name: str, line: int, where: str) -> None:
        self.uses.setdefault((kind, name), []).append((line, where))

    def problems(self) -> list[FileProblem]:
        out: list[FileProblem] = []
        for (kind, name), uses in self.uses.items():
            valid = NODE_VALID if kind == "node" else EDGE_VALID
            hint = [SYNONYMS[name]] if SYNONYMS.get(name) in valid else []
            hint = hint or difflib.get_close_matches(name, valid, n=1)
            msg = f"unknown {kind} attribute" + (f"; did you mean {hint[0]!r}?" if hint else "")
            msg += f" (valid here: {', '.join(valid)})"
            key = self.declared.get((kind, name)) or self.declared.get(("all", name))
            if key is not None:
                n = f"{len(uses)} {kind}{'s' if len(uses) > 1 else ''}"
                fix = "rename its attr.name or remove the key and its data"
                out.append(FileProblem(key[0], f"key {key[1]}", f"{msg}, set on {n}; {fix}", name))
                continue
            (line, where), rest = uses[0], [str(ln) for ln, _ in uses[1:]]
            more = ""
            if rest:
                more = f"; also at line{'s' if len(rest) > 1 else ''} {', '.join(rest[:5])}"
                more += f" and {len(rest) - 5} more" if len(rest) > 5 else ""
            out.append(FileProblem(line, where, f"{msg}; rename or remove it{more}", name))
        return out


def _node_fields(
    attrs: dict[str, Attr], where: str, unknown: _Unknowns
) -> tuple[dict[str, Any], list[FileProblem]]:
    problems: list[FileProblem] = []
    fields: dict[str, Any] = {}
    forwarder: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for name, attr in attrs.items():
        if name in NODE_DRAWING:
            continue
        if name in NODE_ATTRS:
            fields[name] = attr.value
            lines[name] = attr.line
        elif name.startswith(FORWARDER) and len(name) > len(FORWARDER):
            path = name[len(FORWARDER) :].split(".")
            at = forwarder
            for part in path[:-1]:
                at = at.setdefault(part, {})
            at[path[-1]] = attr.value
            lines.setdefault("forwarder", attr.line)
        else:
            unknown.add("node", name, attr.line, where)
    if forwarder:
        fields["forwarder"] = forwarder
    try:
        NodeSpec.model_validate(fields)
    except ValidationError as exc:
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else ""
            problems.append(FileProblem(lines.get(field), where, _explain(err), field))
    return fields, problems


def _link(
    a: str, b: str, line: int, attrs: dict[str, Attr], where: str, unknown: _Unknowns
) -> tuple[LinkSpec | None, list[FileProblem]]:
    problems: list[FileProblem] = []
    refused = False  # an unknown attribute: no link, even if the rest is right
    fields: dict[str, Any] = {"between": (a, b)}
    for name, attr in attrs.items():
        if name in LINK_ATTRS:
            fields[name] = attr.value
        elif name not in EDGE_DRAWING:
            unknown.add("edge", name, attr.line, where)
            refused = True
    try:
        link = LinkSpec.model_validate(fields)
    except ValidationError as exc:
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else ""
            at = attrs[field].line if field in attrs else line
            problems.append(
                FileProblem(at, where, _explain(err), "" if field == "between" else field)
            )
        return None, problems
    return (None if refused else link), problems


def _explain(err: Any) -> str:
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        return msg[len("Value error, ") :]
    return f"{msg} (got {err['input']!r})"


def with_file_topology(
    data: dict[str, Any], topo: FileTopology, source: str
) -> tuple[dict[str, Any], list[tuple[Loc, str]]]:
    """The scenario's data with the file's nodes (the scenario's ``nodes:`` settings merged
    over them) and links; the problems, each at the path of the scenario's field at fault."""
    problems: list[tuple[Loc, str]] = []
    if data.get("links") is not None:
        problems.append(
            (
                ("links",),
                f"the links come from {source}; add these there, or list every node and link "
                "here and remove topology",
            )
        )
    own = data.get("nodes")
    nodes: Any = {name: dict(fields) for name, fields in topo.nodes.items()}
    if isinstance(own, dict):
        for name, settings in own.items():
            if name not in nodes:
                hint = difflib.get_close_matches(str(name), list(nodes), n=1)
                problems.append(
                    (
                        ("nodes", name),
                        f"no node {name!r} in {source}"
                        + (f"; did you mean {hint[0]!r}?" if hint else "")
                        + f" (its nodes: {', '.join(sorted(nodes))}); add it to the file or "
                        "remove it here",
                    )
                )
            else:
                nodes[name] = _merge(nodes[name], settings)
    elif own is not None:
        nodes = own  # not a mapping: the schema says so
    return {**data, "nodes": nodes, "links": topo.links}, problems


def _merge(base: dict[str, Any], over: Any) -> Any:
    if not isinstance(over, dict):
        return over
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out
