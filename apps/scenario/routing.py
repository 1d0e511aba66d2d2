"""Routes for a scenario: explicit ones, or shortest paths to every announced prefix.

``routes: auto`` works like a link-state routing protocol that sees the whole topology (NLSR
in MiniNDN): on every node, each announced prefix gets one route per neighbor that still leads
to a producer, cost = link cost + that neighbor's shortest distance to the producer, so
best-route takes the shortest path and retransmissions may probe the others.  Dead nodes and
cut links are left out of the graph, and dead services' prefixes are withdrawn; the runner
recomputes after a failure and applies the difference through the management protocol.

A route table here is ``{node: {prefix: {neighbor: cost}}}``.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx  # type: ignore[import-untyped]

from apps.scenario.schema import Scenario
from icn.wire.name import from_uri

RouteTable = dict[str, dict[str, dict[str, int]]]


def announcements(sc: Scenario, down_services: Iterable[str] = ()) -> dict[str, set[str]]:
    """Which nodes announce each prefix (from the ``announce`` lists of the services and
    workloads, less those in ``down_services``)."""
    out: dict[str, set[str]] = {}
    dead = set(down_services)
    for svc in [*sc.services, *sc.workloads]:
        if svc.name in dead:
            continue
        for prefix in svc.announce:
            out.setdefault(prefix, set()).add(svc.node)
    return out


# NFD route flags: CHILD_INHERIT (the route serves longer names too) and CAPTURE (longer names
# do not inherit the routes of the prefixes above it)
CAPTURE_FLAGS = 1 | 2


def nested_prefixes(sc: Scenario) -> set[str]:
    """Announced prefixes under another announced prefix (a replica's own names,
    ``/svc/_r/r1``, under its service's ``/svc``).  Their routes capture, as NLSR registers
    its routes: ``/svc/_r/r1`` goes toward r1 alone, not also where ``/svc`` goes."""
    announced = {p: from_uri(p) for p in announcements(sc)}
    return {
        p
        for p, name in announced.items()
        if any(other != name and name.startswith(other) for other in announced.values())
    }


def topology(
    sc: Scenario,
    down_nodes: Iterable[str] = (),
    down_links: Iterable[frozenset[str]] = (),
) -> nx.Graph:
    """The live graph: nodes and links minus the dead ones, weighted by link cost."""
    g: nx.Graph = nx.Graph()
    dead = set(down_nodes)
    cut = set(down_links)
    g.add_nodes_from(n for n in sc.nodes if n not in dead)
    for link in sc.links:
        a, b = link.between
        if a in dead or b in dead or frozenset(link.between) in cut:
            continue
        g.add_edge(a, b, weight=link.cost)
    return g


def auto_routes(
    sc: Scenario,
    down_nodes: Iterable[str] = (),
    down_links: Iterable[frozenset[str]] = (),
    down_services: Iterable[str] = (),
) -> RouteTable:
    g = topology(sc, down_nodes, down_links)
    table: RouteTable = {n: {} for n in g.nodes}
    for prefix, producers in sorted(announcements(sc, down_services).items()):
        live = [p for p in producers if p in g]
        if not live:
            continue
        # distance from every node to its nearest producer of this prefix
        dist = nx.multi_source_dijkstra_path_length(g, live, weight="weight")
        for node in g.nodes:
            if node in producers:
                continue  # the producer's own app registers the prefix there
            hops: dict[str, int] = {}
            for nbr in g.neighbors(node):
                if nbr not in dist:
                    continue
                # a neighbor whose only way to the producer runs back through this node is
                # no route: let the graph without this node decide
                if nbr not in producers:
                    sub = g.subgraph(n for n in g.nodes if n != node)
                    try:
                        d = min(
                            nx.shortest_path_length(sub, nbr, p, weight="weight")
                            for p in live
                            if p in sub and nx.has_path(sub, nbr, p)
                        )
                    except ValueError:
                        continue
                else:
                    d = 0
                hops[nbr] = int(g.edges[node, nbr]["weight"]) + int(d)
            if hops:
                table[node][prefix] = hops
    return table


def explicit_routes(sc: Scenario, down_nodes: Iterable[str] = ()) -> RouteTable:
    dead = set(down_nodes)
    table: RouteTable = {n: {} for n in sc.nodes if n not in dead}
    if isinstance(sc.routes, list):
        for r in sc.routes:
            if r.node in dead:
                continue
            table[r.node].setdefault(r.prefix, {})[r.via] = r.cost
    return table


def compute_routes(
    sc: Scenario,
    down_nodes: Iterable[str] = (),
    down_links: Iterable[frozenset[str]] = (),
    down_services: Iterable[str] = (),
) -> RouteTable:
    """The routes to install; ``down_services`` (services or workloads stopped while their
    nodes run) no longer announce their prefixes (``routes: auto`` only)."""
    if sc.routes == "auto":
        return auto_routes(sc, down_nodes, down_links, down_services)
    return explicit_routes(sc, down_nodes)


def route_diff(
    old: RouteTable, new: RouteTable
) -> tuple[list[tuple[str, str, str, int]], list[tuple[str, str, str]]]:
    """(to register: node, prefix, neighbor, cost; to unregister: node, prefix, neighbor)."""
    add: list[tuple[str, str, str, int]] = []
    remove: list[tuple[str, str, str]] = []
    for node in sorted(set(old) | set(new)):
        o, n = old.get(node, {}), new.get(node, {})
        for prefix in sorted(set(o) | set(n)):
            oh, nh = o.get(prefix, {}), n.get(prefix, {})
            for nbr, cost in sorted(nh.items()):
                if oh.get(nbr) != cost:
                    add.append((node, prefix, nbr, cost))
            for nbr in sorted(set(oh) - set(nh)):
                remove.append((node, prefix, nbr))
    return add, remove
