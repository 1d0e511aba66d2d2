"""GraphML as networkx's ``read_graphml`` reads it, with its lines: expat gives the start line of
every element."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xml.parsers import expat

from apps.scenario.graph_records import (
    Attr,
    FileProblem,
    GraphFormatError,
    RawEdge,
    RawGraph,
    RawNode,
)


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
