"""What a graph file holds, read with the line of every node, edge and attribute, so that a
mistake is reported where it is written.

networkx's readers return graphs without positions, so each format is read here, into these
records: GraphML (:mod:`apps.scenario.graphml`), GML (:mod:`apps.scenario.gml`) and the edge list
(:mod:`apps.scenario.edgelist`).  Names and values are as the file gives them (typed as the format
types them); :mod:`apps.scenario.topology_file` gives them their meaning.  A file that cannot be
read at all (not XML, a GML bracket left open) raises :class:`GraphFormatError`; smaller mistakes
(a data element with an undeclared key, a node without an id) are collected in
``RawGraph.problems`` so that one run reports them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


def decode_text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise GraphFormatError(FileProblem(line, "", "not UTF-8 text; save it as UTF-8")) from None
