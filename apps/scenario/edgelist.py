"""The edge list as networkx's ``read_edgelist`` reads it (``data=True``), with its lines."""

from __future__ import annotations

import ast

from apps.scenario.graph_records import Attr, FileProblem, RawEdge, RawGraph, decode_text


def read_edgelist(data: bytes) -> RawGraph:
    """``a b {'delay': '2ms', 'rate': '100Mbit'}`` per line, as ``nx.write_edgelist`` writes
    it: two node names, then optionally the edge's attributes as a Python dict literal; ``#``
    starts a comment."""
    graph = RawGraph(declares_nodes=False)
    for lineno, line in enumerate(decode_text(data).splitlines(), 1):
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
