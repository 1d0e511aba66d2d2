"""A network of forwarders in this process, linked in memory, for collective tests: nodes,
links (optionally lossy), shortest-path routes to announced prefixes, and endpoints attached to
nodes.  Everything stops in :meth:`Net.stop`."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx  # type: ignore[import-untyped]

from apps.inproc import add_route, attach_endpoint, link
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.face.shaper import ShaperConfig
from icn.dataplane.endpoint import Endpoint


@dataclass
class Net:
    daemons: dict[str, ForwarderDaemon]
    faces: dict[tuple[str, str], int] = field(default_factory=dict)  # (node, neighbor) -> face
    graph: nx.Graph = field(default_factory=nx.Graph)
    endpoints: list[Endpoint] = field(default_factory=list)

    @classmethod
    async def start(cls, links: list[tuple[str, str]], cs_entries: int | None = None) -> Net:
        nodes = sorted({n for pair in links for n in pair})
        daemons = {}
        tables = {"cs_max_entries": cs_entries} if cs_entries is not None else {}
        for n in nodes:
            d = ForwarderDaemon(config_from_dict({"listen": {}, "tables": tables}))
            await d.start()
            daemons[n] = d
        net = cls(daemons)
        for a, b in links:
            fa, fb = link(daemons[a], daemons[b], label=f"{a}-{b}")
            net.faces[(a, b)], net.faces[(b, a)] = fa, fb
            net.graph.add_edge(a, b)
        return net

    def route(self, prefix: str, to: str) -> None:
        """Routes to ``prefix`` on every node, along shortest paths to node ``to``."""
        paths = nx.single_source_shortest_path(self.graph, to)
        for node, path in paths.items():
            if node != to:
                add_route(self.daemons[node], prefix, self.faces[(node, path[-2])])

    def lossy(self, a: str, b: str, loss: float, seed: int = 1) -> None:
        """Drop ``loss`` of the packets on the link a-b, both ways."""
        for x, y, s in ((a, b, seed), (b, a, seed + 1)):
            face = self.daemons[x].faces.get(self.faces[(x, y)])
            assert face is not None
            face.set_shaper(ShaperConfig(loss=loss, seed=s))

    def endpoint(self, node: str) -> Endpoint:
        ep = attach_endpoint(self.daemons[node])
        self.endpoints.append(ep)
        return ep

    def total(self, counter: str) -> int:
        return sum(d.counters.get(counter, 0) for d in self.daemons.values())

    async def stop(self) -> None:
        for ep in self.endpoints:
            ep.close()
        for d in self.daemons.values():
            await d.stop()
