"""Graph files as networkx reads them (GraphML, GML, an edge list), read with the line of every
node, edge and attribute, so that a mistake is reported where it is written.

networkx's readers return graphs without positions, so each format is read here: GraphML with
expat (the start line of every element), GML with a tokenizer that counts lines, the edge list
line by line.  They return raw records, names and values as the file gives them (typed as the
format types them), and leave their meaning to :mod:`apps.scenario.topology_file`.  A file that
cannot be read at all (not XML, a GML bracket left open) raises :class:`GraphFormatError`;
smaller mistakes (a data element with an undeclared key, a node without an id) are collected in
``RawGraph.problems`` so that one run reports them all.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xml.parsers import expat


@dataclass(frozen=True)
class FileProblem:
    """``where`` is ``node a``, ``edge a-b``, ``key d3`` or empty; ``attr`` the attribute."""

    line: int | None
    where: str
    message: str
    attr: str = ""


class GraphFormatError(Exception):
    def __init__(self, problem: FileProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


@dataclass(frozen=True)
class Attr:
    value: Any
    line: int


@dataclass(frozen=True)
class RawNode:
    name: str
    line: int
    attrs: dict[str, Attr]


@dataclass(frozen=True)
class RawEdge:
    source: str
    target: str
    line: int
    attrs: dict[str, Attr]


@dataclass
class RawGraph:
    """``declares_nodes`` is false for an edge list: its nodes are its edges' ends."""

    nodes: list[RawNode] = field(default_factory=list)
    edges: list[RawEdge] = field(default_factory=list)
    declares_nodes: bool = True
    problems: list[FileProblem] = field(default_factory=list)
    # GraphML's attribute declarations, (for, attr.name) -> (line, key id): a misnamed
    # attribute is reported once, at its key
    declared: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


# ---- the edge list (networkx's read_edgelist with data=True) ----------------------------------


def read_edgelist(data: bytes) -> RawGraph:
    """``a b {'delay': '2ms', 'rate': '100Mbit'}`` per line, as ``nx.write_edgelist`` writes
    it: two node names, then optionally the edge's attributes as a Python dict literal; ``#``
    starts a comment."""
    graph = RawGraph(declares_nodes=False)
    for lineno, line in enumerate(_decode(data).splitlines(), 1):
        line = line.split("#", 1)[0]  # as networkx: a '#' anywhere starts a comment
        parts = line.split(None, 2)
        if not parts:
            continue
        if len(parts) < 2:
            graph.problems.append(
                FileProblem(
                    lineno,
                    "",
                    f"{line.strip()!r}: a line of an edge list names two nodes, then "
                    "optionally attributes: a b {'delay': '2ms'}",
                )
            )
            continue
        attrs: dict[str, Attr] = {}
        if len(parts) == 3:
            try:
                value = ast.literal_eval(parts[2].strip())
            except (ValueError, SyntaxError):
                value = None
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                graph.problems.append(
                    FileProblem(
                        lineno,
                        f"edge {parts[0]}-{parts[1]}",
                        f"{parts[2].strip()!r} is not a dict of attributes; write them as "
                        "nx.write_edgelist does: a b {'delay': '2ms', 'rate': '100Mbit'}",
                    )
                )
                continue
            attrs = {k: Attr(v, lineno) for k, v in value.items()}
        graph.edges.append(RawEdge(parts[0], parts[1], lineno, attrs))
    return graph


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise GraphFormatError(FileProblem(line, "", "not UTF-8 text; save it as UTF-8")) from None


# ---- GML (networkx's read_gml: nodes named by their label) -------------------------------------

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
    top = _gml_parse(_decode(data))
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


# ---- GraphML (networkx's read_graphml) -----------------------------------------------------


@dataclass
class _Element:
    tag: str
    attrs: dict[str, str]
    line: int
    children: list[_Element] = field(default_factory=list)
    text: list[str] = field(default_factory=list)


def _xml(data: bytes) -> _Element:
    parser = expat.ParserCreate()
    top: list[_Element] = []
    stack: list[_Element] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = _Element(tag.rpartition(":")[2], attrs, parser.CurrentLineNumber)
        (stack[-1].children if stack else top).append(el)
        stack.append(el)

    def end(tag: str) -> None:
        stack.pop()

    def text(chars: str) -> None:
        if stack:
            stack[-1].text.append(chars)

    def entity(*args: object) -> None:
        # no entity expansion: a graph file has no use for it, and it can blow up
        raise GraphFormatError(
            FileProblem(
                parser.CurrentLineNumber,
                "",
                "entity declarations are not read; remove them from the DOCTYPE",
            )
        )

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.EntityDeclHandler = entity
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        message = f"not valid XML: {expat.ErrorString(exc.code)}"
        raise GraphFormatError(FileProblem(exc.lineno, "", message)) from None
    return top[0]


def _boolean(text: str) -> bool:
    return {"true": True, "false": False, "1": True, "0": False}[text.strip().lower()]


# attr.type as networkx's GraphML reader converts it
_GRAPHML_TYPES: dict[str, Callable[[str], Any]] = {
    "string": str,
    "int": int,
    "long": int,
    "integer": int,
    "float": float,
    "double": float,
    "boolean": _boolean,
}


@dataclass(frozen=True)
class _Key:
    name: str
    kind: str
    type: str
    default: Attr | None


def read_graphml(data: bytes) -> RawGraph:
    """``<key id="d0" for="edge" attr.name="delay" attr.type="string"/>`` declares an
    attribute, ``<data key="d0">2ms</data>`` inside a ``<node id="a">`` or an
    ``<edge source="a" target="b">`` sets it; a key's ``<default>`` applies where no data
    does.  One ``<graph>``; its own data, ``<desc>`` and the edge default are not read."""
    root = _xml(data)
    if root.tag != "graphml":
        raise GraphFormatError(
            FileProblem(
                root.line,
                "",
                f"the top element is <{root.tag}>, not <graphml>; is this a GraphML file?",
            )
        )
    graph = RawGraph()
    keys = _graphml_keys(root, graph)
    graphs = [el for el in root.children if el.tag == "graph"]
    if len(graphs) != 1:
        raise GraphFormatError(
            FileProblem(
                graphs[1].line if graphs else root.line,
                "",
                f"a GraphML file holds one <graph> here, found {len(graphs)}",
            )
        )
    for el in graphs[0].children:
        if el.tag in ("hyperedge", "graph"):
            graph.problems.append(
                FileProblem(el.line, "", f"<{el.tag}> is not read; links join two nodes")
            )
        elif el.tag == "node":
            ident = el.attrs.get("id")
            if ident is None:
                graph.problems.append(FileProblem(el.line, "node", 'has no id; <node id="a">'))
                continue
            attrs = _graphml_data(el, keys, "node", f"node {ident}", graph)
            graph.nodes.append(RawNode(ident, el.line, attrs))
        elif el.tag == "edge":
            source, target = el.attrs.get("source"), el.attrs.get("target")
            if source is None or target is None:
                graph.problems.append(
                    FileProblem(
                        el.line, "edge", 'needs source and target: <edge source="a" target="b">'
                    )
                )
                continue
            attrs = _graphml_data(el, keys, "edge", f"edge {source}-{target}", graph)
            graph.edges.append(RawEdge(source, target, el.line, attrs))
    return graph


def _graphml_keys(root: _Element, graph: RawGraph) -> dict[str, _Key]:
    keys: dict[str, _Key] = {}
    for el in root.children:
        if el.tag != "key":
            continue
        ident = el.attrs.get("id", "")
        # networkx names yEd's graphics keys by their yfiles.type
        name = el.attrs.get("attr.name") or el.attrs.get("yfiles.type") or ident
        type_ = el.attrs.get("attr.type", "string")
        convert = _GRAPHML_TYPES.get(type_)
        if convert is None:
            graph.problems.append(
                FileProblem(
                    el.line,
                    f"key {ident}",
                    f"attr.type {type_!r} is not a GraphML "
                    f"type; use one of {', '.join(_GRAPHML_TYPES)}",
                    "attr.type",
                )
            )
            continue
        default = None
        for child in el.children:
            if child.tag == "default":
                text = "".join(child.text)
                try:
                    default = Attr(convert(text), child.line)
                except (ValueError, KeyError):
                    graph.problems.append(_bad_value(child.line, f"key {ident}", name, text, type_))
        keys[ident] = _Key(name, el.attrs.get("for", "all"), type_, default)
        graph.declared.setdefault((keys[ident].kind, name), (el.line, ident))
    return keys


def _graphml_data(
    el: _Element, keys: dict[str, _Key], kind: str, where: str, graph: RawGraph
) -> dict[str, Attr]:
    attrs: dict[str, Attr] = {}
    given: set[str] = set()  # set here, even if wrongly: no default stands in
    for child in el.children:
        if child.tag != "data":
            if child.tag in ("graph", "port"):
                graph.problems.append(
                    FileProblem(child.line, where, f"<{child.tag}> inside a {kind} is not read")
                )
            continue
        ident = child.attrs.get("key", "")
        key = keys.get(ident)
        if key is None:
            graph.problems.append(
                FileProblem(
                    child.line,
                    where,
                    f"data key {ident!r} is not declared; add "
                    f'<key id="{ident}" for="{kind}" attr.name="..." attr.type="string"/> or '
                    "remove the data",
                )
            )
            continue
        if key.name in given:
            graph.problems.append(
                FileProblem(child.line, where, "set twice; keep one <data> of it", key.name)
            )
            continue
        given.add(key.name)
        text = "".join(child.text)
        try:
            attrs[key.name] = Attr(_GRAPHML_TYPES[key.type](text), child.line)
        except (ValueError, KeyError):
            graph.problems.append(_bad_value(child.line, where, key.name, text, key.type))
    for key in keys.values():
        if key.default is not None and key.kind in (kind, "all") and key.name not in given:
            attrs[key.name] = key.default
    return attrs


def _bad_value(line: int, where: str, name: str, text: str, type_: str) -> FileProblem:
    return FileProblem(
        line,
        where,
        f"{text!r} is not a {type_} (its key's attr.type); fix the value, or "
        'declare the key attr.type="string" to write units like 2ms',
        name,
    )


READERS: dict[str, Callable[[bytes], RawGraph]] = {
    ".graphml": read_graphml,
    ".gml": read_gml,
    ".edgelist": read_edgelist,
    ".edges": read_edgelist,
}
