"""Draw scenarios/topologies/research-net.graphml: a research and education network of a
fictional country, made for this project.

Nine points of presence (PoPs) form a backbone ring with three chords; each serves two to four
member sites (universities, labs, a computing centre, a hospital) placed 30-180 km around it,
some of them linked to a second PoP as well.  Distances are in km on the map (``x``, ``y``); a
link's delay is its fibre length (1.3 times the straight line) at 200 km per ms, its cost that
delay in units of 0.1 ms (so ``routes: auto`` takes the fastest path; 200 more on a site's
backup link), its rate 10Gbit in the backbone and
10Gbit, 1Gbit or 100Mbit to a site.  The same seed draws the same map:

    python scripts/research_net.py > scenarios/topologies/research-net.graphml
"""

from __future__ import annotations

import io
import math
import random
import sys

import networkx as nx  # type: ignore[import-untyped]

SEED = 23
BACKUP_COST = 200
# PoP: (x, y) in km, drawn by hand
POPS = {
    "northport": (520, 80),
    "eastgate": (1180, 180),
    "highmoor": (880, 330),
    "westhill": (130, 300),
    "midland": (640, 520),
    "riverton": (1420, 560),
    "lakeside": (300, 760),
    "southbay": (820, 930),
    "coastal": (1300, 980),
}
RING = ["northport", "highmoor", "eastgate", "riverton", "coastal", "southbay", "lakeside",
        "westhill"]  # fmt: skip
CHORDS = [("midland", "northport"), ("midland", "southbay"), ("midland", "riverton"),
          ("midland", "westhill"), ("highmoor", "midland")]  # fmt: skip
SITE_KINDS = [("uni", "10Gbit"), ("uni", "1Gbit"), ("lab", "1Gbit"), ("hpc", "10Gbit"),
              ("med", "100Mbit"), ("obs", "100Mbit")]  # fmt: skip


def fibre_delay_ms(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.1, round(math.dist(a, b) * 1.3 / 200, 1))


def draw(seed: int = SEED) -> nx.Graph:
    rnd = random.Random(seed)
    g = nx.Graph()
    where: dict[str, tuple[float, float]] = {}
    for name, xy in POPS.items():
        g.add_node(name, label=f"{name.capitalize()} PoP", x=float(xy[0]), y=float(xy[1]),
                   cs_capacity=20000)  # fmt: skip
        where[name] = xy

    def link(a: str, b: str, rate: str, extra_cost: int = 0) -> None:
        ms = fibre_delay_ms(where[a], where[b])
        g.add_edge(a, b, delay=f"{ms:g}ms", rate=rate, cost=round(ms * 10) + extra_cost)

    for a, b in [*zip(RING, RING[1:] + RING[:1], strict=True), *CHORDS]:
        link(a, b, "10Gbit")
    for pop, (px, py) in POPS.items():
        counts: dict[str, int] = {}
        for _ in range(rnd.randint(2, 4)):
            kind, rate = rnd.choice(SITE_KINDS)
            counts[kind] = counts.get(kind, 0) + 1
            site = f"{pop}_{kind}{counts[kind]}"
            angle, km = rnd.uniform(0, 2 * math.pi), rnd.uniform(30, 180)
            xy = (round(px + km * math.cos(angle)), round(py + km * math.sin(angle)))
            g.add_node(site, label=f"{kind} {counts[kind]} at {pop}", x=float(xy[0]),
                       y=float(xy[1]))  # fmt: skip
            where[site] = xy
            link(site, pop, rate)
            if rnd.random() < 0.3:  # dual-homed: a backup link to the nearest other PoP, its
                # cost high enough that no traffic between others crosses the site
                other = min((p for p in POPS if p != pop), key=lambda p: math.dist(xy, POPS[p]))
                link(site, other, rate, extra_cost=BACKUP_COST)
    return g


def graphml(g: nx.Graph, seed: int = SEED) -> str:
    out = io.BytesIO()
    nx.write_graphml(g, out, encoding="utf-8")
    head, _, rest = out.getvalue().decode().partition("\n")
    note = (
        f"<!-- research-net: a fictional research and education network drawn for this "
        f"project by scripts/research_net.py (seed {seed}): {g.number_of_nodes()} nodes, "
        f"{g.number_of_edges()} links; x, y in km; delay from the fibre length at 200 km/ms -->"
    )
    return f"{head}\n{note}\n{rest}"


if __name__ == "__main__":
    graph = draw()
    sys.stdout.write(graphml(graph))
    lengths = dict(nx.all_pairs_dijkstra_path_length(graph, weight="cost"))
    far = max(((a, b) for a in lengths for b in lengths[a]), key=lambda ab: lengths[ab[0]][ab[1]])
    print(f"farthest: {far[0]} - {far[1]}, cost {lengths[far[0]][far[1]]}", file=sys.stderr)
