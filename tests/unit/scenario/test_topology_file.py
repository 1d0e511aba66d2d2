"""``topology:`` files: GraphML, GML and edge lists read as networkx reads them, every mistake
reported with its line in the file, the field and the fix, before anything starts."""

from __future__ import annotations

import importlib.util
import io
import itertools
from pathlib import Path
from typing import Any

import networkx as nx  # type: ignore[import-untyped]
import pytest

from apps.scenario.loader import ScenarioError, load_scenario
from apps.scenario.routing import compute_routes, topology
from apps.scenario.schema import Scenario

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"

GRAPHML = """\
<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="d0" for="edge" attr.name="delay" attr.type="string"/>
  <key id="d1" for="edge" attr.name="rate" attr.type="string"/>
  <key id="d2" for="node" attr.name="cs_capacity" attr.type="int"/>
  <key id="d3" for="edge" attr.name="loss" attr.type="double">
    <default>0.01</default>
  </key>
  <key id="d4" for="node" attr.name="label" attr.type="string"/>
  <graph edgedefault="undirected">
    <node id="a"><data key="d2">100</data><data key="d4">A site</data></node>
    <node id="b"/>
    <node id="c"/>
    <edge source="a" target="b"><data key="d0">2ms</data><data key="d1">100Mbit</data></edge>
    <edge source="b" target="c">
      <data key="d0">5ms</data>
      <data key="d3">0</data>
    </edge>
  </graph>
</graphml>
"""


def scenario(tmp_path: Path, graph_name: str, graph: str, extra: str = "") -> Scenario:
    (tmp_path / graph_name).write_text(graph)
    path = tmp_path / "s.yaml"
    path.write_text(f"name: t\ntopology: {graph_name}\n{extra}")
    return load_scenario(path, check_entries=False)


def problems(tmp_path: Path, graph_name: str, graph: str, extra: str = "") -> list[str]:
    with pytest.raises(ScenarioError) as info:
        scenario(tmp_path, graph_name, graph, extra)
    source = str(tmp_path / "s.yaml")
    return [p.format(source).replace(f"{tmp_path}/", "") for p in info.value.problems]


def links_of(sc: Scenario) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        link.between: link.model_dump(exclude={"between"}, exclude_defaults=True)
        for link in sc.links
    }


# ---- reading what networkx reads ------------------------------------------------------------


def test_graphml_nodes_links_and_defaults(tmp_path: Path) -> None:
    sc = scenario(tmp_path, "g.graphml", GRAPHML)
    assert list(sc.nodes) == ["a", "b", "c"]
    assert sc.nodes["a"].cs_capacity == 100 and sc.nodes["b"].cs_capacity is None
    assert links_of(sc) == {
        ("a", "b"): {"delay": 0.002, "rate": 1e8, "loss": 0.01},  # the key's default
        ("b", "c"): {"delay": 0.005},  # its own loss, 0
    }
    assert sc.topology == "g.graphml"


def _graph() -> nx.Graph:
    g = nx.Graph()
    g.add_node("a", cs_capacity=50, strategy="multicast", label="the first")
    g.add_node("b", x=1.5, y=2.5)
    g.add_node("c")
    g.add_edge("a", "b", delay="2ms", rate="100Mbit", loss="1%", cost=3)
    g.add_edge("b", "c", delay="1ms", transport="tcp", seed=7, jitter="500us")
    return g


EXPECTED_LINKS = {
    ("a", "b"): {"delay": 0.002, "rate": 1e8, "loss": 0.01, "cost": 3},
    ("b", "c"): {"delay": 0.001, "transport": "tcp", "seed": 7, "jitter": 0.0005},
}


@pytest.mark.parametrize(
    ("suffix", "write"),
    [
        (".graphml", nx.write_graphml),
        (".gml", nx.write_gml),
        (".edgelist", lambda g, f: nx.write_edgelist(g, f, data=True)),
    ],
)
def test_files_networkx_writes_are_read_alike(tmp_path: Path, suffix: str, write: Any) -> None:
    out = io.BytesIO()
    write(_graph(), out)
    sc = scenario(tmp_path, f"g{suffix}", out.getvalue().decode())
    assert links_of(sc) == EXPECTED_LINKS
    if suffix != ".edgelist":  # an edge list carries no node attributes
        assert sc.nodes["a"].cs_capacity == 50 and sc.nodes["a"].strategy == "multicast"
    # and networkx reads the same graph from the file
    back = {".graphml": nx.read_graphml, ".gml": nx.read_gml, ".edgelist": nx.read_edgelist}
    g = back[suffix](tmp_path / f"g{suffix}")
    assert {frozenset(e) for e in g.edges} == {frozenset(k) for k in EXPECTED_LINKS}
    assert set(g.nodes) == set(sc.nodes)


def test_edgelist_by_hand(tmp_path: Path) -> None:
    text = "# core\na b {'delay': '2ms', 'rate': '1Gbit'}\n\nb c  # no attributes\n"
    sc = scenario(tmp_path, "g.edgelist", text)
    assert list(sc.nodes) == ["a", "b", "c"]
    assert links_of(sc) == {("a", "b"): {"delay": 0.002, "rate": 1e9}, ("b", "c"): {}}


def test_forwarder_settings_on_a_node(tmp_path: Path) -> None:
    graph = GRAPHML.replace(
        '<key id="d4" for="node" attr.name="label"',
        '<key id="d4" for="node" attr.name="forwarder.tables.pit_max_entries"',
    ).replace(">A site<", ">5000<")
    sc = scenario(tmp_path, "g.graphml", graph)
    assert sc.nodes["a"].forwarder == {"tables": {"pit_max_entries": "5000"}}
    # the scenario's forwarder settings merge with the file's
    sc = scenario(
        tmp_path, "g.graphml", graph, "nodes:\n  a: {forwarder: {tables: {cs_max_entries: 9}}}\n"
    )
    assert sc.nodes["a"].forwarder == {"tables": {"pit_max_entries": "5000", "cs_max_entries": 9}}
    (msg,) = problems(tmp_path, "g.graphml", graph.replace("pit_max_entries", "pit_max_entrys"))
    assert msg.startswith("g.graphml:11: node a: forwarder:") and "pit_max_entrys" in msg


# ---- the scenario's own nodes ---------------------------------------------------------------


def test_yaml_nodes_add_settings(tmp_path: Path) -> None:
    extra = "nodes:\n  a: {strategy: multicast}\n  b: {cs_capacity: 7}\n"
    sc = scenario(tmp_path, "g.graphml", GRAPHML, extra)
    assert sc.nodes["a"].cs_capacity == 100 and sc.nodes["a"].strategy == "multicast"
    assert sc.nodes["b"].cs_capacity == 7 and list(sc.nodes) == ["a", "b", "c"]
    # the file's value, overridden
    sc = scenario(tmp_path, "g.graphml", GRAPHML, "nodes:\n  a: {cs_capacity: 3}\n")
    assert sc.nodes["a"].cs_capacity == 3


def test_yaml_node_absent_from_the_file_and_links_beside_it(tmp_path: Path) -> None:
    extra = "nodes:\n  a: {}\n  bb: {}\nlinks:\n  - {between: [a, c]}\n"
    msgs = problems(tmp_path, "g.graphml", GRAPHML, extra)
    assert msgs == [  # in the order of the file
        "s.yaml:5:3: nodes.bb: no node 'bb' in g.graphml; did you mean 'b'? (its nodes: a, b, "
        "c); add it to the file or remove it here",
        "s.yaml:6:1: links: the links come from g.graphml; add these there, or list every node "
        "and link here and remove topology",
    ]
    # a setting of a file's node is checked and pointed at in the scenario
    (msg,) = problems(tmp_path, "g.graphml", GRAPHML, "nodes:\n  a: {cs_capacty: 3}\n")
    assert msg.startswith("s.yaml:4:7: nodes.a.cs_capacty: unknown field")


def test_references_to_file_nodes_are_checked(tmp_path: Path) -> None:
    extra = "faults:\n  - {at: 1s, cut: [a, c]}\n"
    (msg,) = problems(tmp_path, "g.graphml", GRAPHML, extra)
    assert msg == "s.yaml:4:14: faults[0].cut: no link between a and c; add it under links"


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: t\ntopology: nothere.graphml\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, check_entries=False)
    (p,) = info.value.problems
    assert p.format("s.yaml") == (
        f"s.yaml:2:1: topology: {tmp_path}/nothere.graphml: cannot read the file: "
        "No such file or directory"
    )
    (msg,) = problems(tmp_path, "g.json", "{}")
    assert msg == (
        "s.yaml:2:1: topology: g.json: .json: not a graph format read here; name the file "
        ".graphml (GraphML), .gml (GML) or .edgelist (an edge list)"
    )


# ---- mistakes, with their line and field, in each format --------------------------------------


def test_graphml_mistakes(tmp_path: Path) -> None:
    graph = (
        GRAPHML.replace(">5ms<", ">fast<")
        .replace('attr.name="label"', 'attr.name="colour"')
        .replace('<node id="c"/>', '<node id="c"/>\n    <node id="b"/>')
        .replace(
            "  </graph>",
            '    <edge source="c" target="z"/>\n    <edge source="b" target="a"/>\n'
            '    <edge source="a" target="c"><data key="d9">1</data></edge>\n  </graph>',
        )
    )
    assert problems(tmp_path, "g.graphml", graph) == [
        # where the attribute is named, once for all the nodes that set it
        "g.graphml:9: key d4: colour: unknown node attribute (valid here: cs_capacity, "
        "strategy, forwarder.<setting>, label, x, y, lat, lon), set on 1 node; rename its "
        "attr.name or remove the key and its data",
        "g.graphml:14: node b: already declared at line 12; give each node its own name",
        "g.graphml:17: edge b-c: delay: 'fast' is not a duration; write it like 250ms, 1.5s, "
        "2m (a bare number means seconds)",
        "g.graphml:20: edge c-z: no node 'z' in this file; declare it or fix the edge's end",
        "g.graphml:21: edge b-a: b and a are already linked at line 15 (a link carries both "
        "directions); keep one edge",
        'g.graphml:22: edge a-c: data key \'d9\' is not declared; add <key id="d9" for="edge" '
        'attr.name="..." attr.type="string"/> or remove the data',
    ]


def test_graphml_typed_values_and_bad_xml(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, "g.graphml", GRAPHML.replace(">100<", ">many<"))
    assert msg == (
        "g.graphml:11: node a: cs_capacity: 'many' is not a int (its key's attr.type); fix the "
        'value, or declare the key attr.type="string" to write units like 2ms'
    )
    (msg,) = problems(tmp_path, "g.graphml", GRAPHML.replace("<default>0.01", "<default>1%"))
    assert msg.startswith("g.graphml:7: key d3: loss: '1%' is not a double")
    (msg,) = problems(tmp_path, "g.graphml", GRAPHML.replace('<node id="b"/>', "<node>"))
    assert msg == "g.graphml:19: not valid XML: mismatched tag"  # where <node> should close
    (msg,) = problems(tmp_path, "g.graphml", GRAPHML.replace('"d2">100<', '"d2">-4<'))
    assert msg.startswith("g.graphml:11: node a: cs_capacity: Input should be greater than")


GML = """\
graph [
  directed 0
  node [ id 0 label "a" cs_capacity 10 ]
  node [ id 1 label "b" ]
  node [ id 2 label "c" ]
  edge [ source 0 target 1 delay "2ms" rate "1Gbit" ]
  edge [
    source 1
    target 2
    delay "2ms"
  ]
]
"""


def test_gml_reads(tmp_path: Path) -> None:
    sc = scenario(tmp_path, "g.gml", GML)
    assert links_of(sc) == {("a", "b"): {"delay": 0.002, "rate": 1e9}, ("b", "c"): {"delay": 0.002}}
    assert sc.nodes["a"].cs_capacity == 10


def test_gml_mistakes(tmp_path: Path) -> None:
    graph = (
        GML.replace('delay "2ms" rate "1Gbit" ]', 'delay "2 parsecs" weight 3 ]')
        .replace("    target 2\n", "    target 7\n")
        .replace("  ]\n]\n", "  ]\n  edge [ source 1 target 0 ]\n]\n")
    )
    assert problems(tmp_path, "g.gml", graph) == [
        "g.gml:6: edge a-b: delay: '2 parsecs': unknown time unit 'parsecs'; use one of us, "
        "ms, s, m, min, h, d",
        "g.gml:6: edge a-b: weight: unknown edge attribute; did you mean 'cost'? (valid here: "
        "transport, delay, jitter, loss, rate, cost, seed, label); rename or remove it",
        'g.gml:9: edge: target: no node has id 7; declare it with node [ id 7 label "..." ] '
        "or fix the id",
        "g.gml:12: edge b-a: b and a are already linked at line 6 (a link carries both "
        "directions); keep one edge",
    ]
    (msg,) = problems(tmp_path, "g.gml", GML.replace('node [ id 1 label "b" ]', "node [ id 1 ]"))
    assert msg.startswith("g.gml:4: node: has no label; a GML node needs an id")
    (msg,) = problems(tmp_path, "g.gml", GML.replace('"c" ]', '"c"'))
    assert msg == "g.gml:12: a '[' is not closed; add ']'"
    (msg,) = problems(tmp_path, "g.gml", GML.replace('label "c"', 'label "New York"'))
    assert msg.startswith("g.gml:5: node New York: 'New York': use a letter then letters")


def test_edgelist_mistakes(tmp_path: Path) -> None:
    text = (
        "a b {'delay': '2ms'}\n"
        "b c {'delay': 'soon', 'rat': '1Gbit'}\n"
        "# a comment\n"
        "c a {'delay': '1ms', 'rat': '1Gbit'}\n"
        "a c\n"
        "c c\n"
        "d e delay=2ms\n"
        "f\n"
    )
    assert problems(tmp_path, "g.edgelist", text) == [
        "g.edgelist:2: edge b-c: delay: 'soon' is not a duration; write it like 250ms, 1.5s, "
        "2m (a bare number means seconds)",
        "g.edgelist:2: edge b-c: rat: unknown edge attribute; did you mean 'rate'? (valid "
        "here: transport, delay, jitter, loss, rate, cost, seed, label); rename or remove it; "
        "also at line 4",
        "g.edgelist:5: edge a-c: a and c are already linked at line 4 (a link carries both "
        "directions); keep one edge",
        "g.edgelist:6: edge c-c: a link needs two different nodes, got [c, c]",
        "g.edgelist:7: edge d-e: 'delay=2ms' is not a dict of attributes; write them as "
        "nx.write_edgelist does: a b {'delay': '2ms', 'rate': '100Mbit'}",
        "g.edgelist:8: 'f': a line of an edge list names two nodes, then optionally "
        "attributes: a b {'delay': '2ms'}",
    ]


# ---- the shipped example --------------------------------------------------------------------


def test_research_net_is_a_few_dozen_nodes_with_shaped_links() -> None:
    sc = load_scenario(SCENARIOS / "research-net.yaml")
    assert 30 <= len(sc.nodes) <= 45 and sc.topology is not None
    assert all(link.delay > 0 and link.rate is not None for link in sc.links)
    # producer and consumer at far ends: no node is more hops from the producer along the
    # routes than the consumer
    producer = sc.services[0].node
    consumer = sc.workloads[0].node
    g = topology(sc)
    paths = nx.single_source_dijkstra_path(g, producer, weight="weight")
    assert len(paths[consumer]) - 1 == max(len(p) - 1 for p in paths.values()) == 6
    # and routes: auto takes the fastest path (cost: the delay), the one the scenario shows
    routes = compute_routes(sc)
    path = [consumer]
    while path[-1] != producer and len(path) <= len(sc.nodes):
        nexthops = routes[path[-1]]["/research/data"]
        (best,) = [n for n, cost in nexthops.items() if cost == min(nexthops.values())]
        path.append(best)
    shown = "lakeside_uni2 - lakeside - southbay - midland - highmoor - eastgate - eastgate_hpc1"
    assert " - ".join(path) == shown
    assert shown in (SCENARIOS / "research-net.yaml").read_text()
    links = {frozenset(link.between): link for link in sc.links}
    delay = sum(links[frozenset(hop)].delay for hop in itertools.pairwise(path))
    assert 0.010 < delay < 0.015


def test_research_net_is_what_its_script_draws() -> None:
    spec = importlib.util.spec_from_file_location("research_net", ROOT / "scripts/research_net.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (SCENARIOS / "topologies/research-net.graphml").read_text()
    assert module.graphml(module.draw()) == text
