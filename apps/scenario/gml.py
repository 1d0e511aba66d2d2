"""GML as networkx's ``read_gml`` reads it (nodes named by their label), with its lines: a
tokenizer that counts them, and a parser that keeps the line of every key."""

from __future__ import annotations

import html
import re
from typing import Any

from apps.scenario.graph_records import (
    Attr,
    FileProblem,
    GraphFormatError,
    RawEdge,
    RawGraph,
    RawNode,
    decode_text,
)

_GML_TOKEN = re.compile(
    r"""(?P<space>\s+|\#[^\n]*)
    |(?P<key>[A-Za-z_][0-9A-Za-z_]*)
    |(?P<real>[+-]?(?:[0-9]*\.[0-9]+|[0-9]+\.[0-9]*|INF)(?:[Ee][+-]?[0-9]+)?)
    |(?P<int>[+-]?[0-9]+)
    |(?P<string>"[^"]*")
    |(?P<open>\[)
    |(?P<close>\])""",
    re.VERBOSE,
)

# a GML list: (key, value, line) in file order; a value is an int, a float, a str or a list
GmlList = list[tuple[str, Any, int]]


def _gml_tokens(text: str) -> list[tuple[str, Any, int]]:
    tokens: list[tuple[str, Any, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _GML_TOKEN.match(text, pos)
        if m is None:
            bad = text[pos:].split(None, 1)[0][:40]
            raise GraphFormatError(
                FileProblem(
                    line,
                    "",
                    f"cannot read {bad!r} here; GML is key value pairs, "
                    'values being numbers, "strings" or [ lists ]',
                )
            )
        kind, value = m.lastgroup or "", m.group()
        if kind == "real":
            tokens.append((kind, float(value), line))
        elif kind == "int":
            tokens.append((kind, int(value), line))
        elif kind == "string":
            tokens.append((kind, html.unescape(value[1:-1]), line))
        elif kind != "space":
            tokens.append((kind, value, line))
        line += value.count("\n")
        pos = m.end()
    return tokens


def _gml_parse(text: str) -> GmlList:
    tokens = _gml_tokens(text)
    stack: list[GmlList] = [[]]
    i = 0
    while i < len(tokens):
        kind, value, line = tokens[i]
        if kind == "close":
            if len(stack) == 1:
                raise GraphFormatError(FileProblem(line, "", "a ']' closes no '['; remove it"))
            stack.pop()
            i += 1
            continue
        if kind != "key":
            raise GraphFormatError(
                FileProblem(line, "", f"expected a key here, found {value!r}; GML is key value")
            )
        if i + 1 >= len(tokens):
            raise GraphFormatError(FileProblem(line, "", f"{value} has no value; add one"))
        vkind, v, _ = tokens[i + 1]
        if vkind == "open":
            child: GmlList = []
            stack[-1].append((value, child, line))
            stack.append(child)
        elif vkind == "key" and v in ("INF", "NAN"):
            stack[-1].append((value, float(v), line))
        elif vkind in ("int", "real", "string"):
            stack[-1].append((value, v, line))
        else:
            raise GraphFormatError(
                FileProblem(
                    line, "", f"{value}: expected a number, a \"string\" or '[', found {v!r}"
                )
            )
        i += 2
    if len(stack) > 1:
        raise GraphFormatError(
            FileProblem(tokens[-1][2] if tokens else 1, "", "a '[' is not closed; add ']'")
        )
    return stack[0]


def read_gml(data: bytes) -> RawGraph:
    """``graph [ node [ id 0 label "a" ... ] edge [ source 0 target 1 delay "2ms" ] ]``:
    nodes are named by their ``label`` and edges refer to their ``id``, as networkx's
    ``read_gml`` reads them; ``directed`` and ``multigraph`` are read but a link carries both
    directions, so a -> b and b -> a are one link twice."""
    top = _gml_parse(decode_text(data))
    graphs = [(v, line) for k, v, line in top if k == "graph"]
    if len(graphs) != 1 or not isinstance(graphs[0][0], list):
        where = graphs[1][1] if len(graphs) > 1 else 1
        raise GraphFormatError(
            FileProblem(where, "", "a GML file holds one graph [ ... ]; keep one")
        )
    body, _ = graphs[0]
    graph = RawGraph()
    names: dict[Any, str | None] = {}
    for kind, value, line in body:
        if kind not in ("node", "edge"):
            continue  # graph attributes (directed, label...): the scenario has no use for them
        if not isinstance(value, list):
            graph.problems.append(FileProblem(line, "", f"{kind} must be a list: {kind} [ ... ]"))
            continue
        attrs, repeated = _gml_attrs(value)
        graph.problems += [
            FileProblem(ln, f"{kind} at line {line}", "appears twice; keep one", k)
            for k, ln in repeated
        ]
        if kind == "node":
            _gml_node(graph, names, attrs, line)
        else:
            _gml_edge(graph, names, attrs, line)
    return graph


def _gml_attrs(items: GmlList) -> tuple[dict[str, Attr], list[tuple[str, int]]]:
    attrs: dict[str, Attr] = {}
    repeated: list[tuple[str, int]] = []
    for k, v, line in items:
        if k in attrs:
            repeated.append((k, line))
            continue
        # a nested list (graphics [ x 1 y 2 ]) as a dict: it is no attribute of ours anyway
        attrs[k] = Attr({kk: vv for kk, vv, _ in v} if isinstance(v, list) else v, line)
    return attrs, repeated


def _gml_node(
    graph: RawGraph, names: dict[Any, str | None], attrs: dict[str, Attr], line: int
) -> None:
    ident, label = attrs.pop("id", None), attrs.pop("label", None)
    if ident is not None and ident.value in names:
        graph.problems.append(
            FileProblem(
                ident.line,
                "node",
                f"id {ident.value!r} is already used at a node above; give each node its own id",
                "id",
            )
        )
        return
    if ident is None or label is None:
        missing = " and ".join(n for n, a in (("id", ident), ("label", label)) if a is None)
        graph.problems.append(
            FileProblem(
                line,
                "node",
                f"has no {missing}; a GML node needs an id (edges refer to it) and a label "
                '(its name), e.g. node [ id 0 label "a" ]',
            )
        )
        if ident is not None:
            names[ident.value] = None  # its edges are not reported again
        return
    names[ident.value] = str(label.value)
    graph.nodes.append(RawNode(str(label.value), line, attrs))


def _gml_edge(
    graph: RawGraph, names: dict[Any, str | None], attrs: dict[str, Attr], line: int
) -> None:
    ends: list[str] = []
    for end in ("source", "target"):
        a = attrs.pop(end, None)
        if a is None:
            graph.problems.append(
                FileProblem(line, "edge", f"has no {end}; write edge [ source 0 target 1 ]")
            )
        elif a.value not in names:
            graph.problems.append(
                FileProblem(
                    a.line,
                    "edge",
                    f"no node has id {a.value!r}; declare it with "
                    f'node [ id {a.value!r} label "..." ] or fix the id',
                    end,
                )
            )
        else:
            name = names[a.value]
            if name is not None:
                ends.append(name)
    if len(ends) == 2:
        graph.edges.append(RawEdge(ends[0], ends[1], line, attrs))
