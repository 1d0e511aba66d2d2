"""A graph file's own coordinates place the nodes (a map stays a map); without them, or with a
node missing them, the page lays the graph out itself."""

from __future__ import annotations

from pathlib import Path

from apps.scenario.loader import load_scenario
from apps.scenario.ui.model import topology
from apps.scenario.ui.positions import file_positions, fit

GRAPHML = """<?xml version='1.0' encoding='utf-8'?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="x" for="node" attr.name="{x}" attr.type="double" />
  <key id="y" for="node" attr.name="{y}" attr.type="double" />
  <graph edgedefault="undirected">
    <node id="north"><data key="x">100</data><data key="y">{north_y}</data></node>
    <node id="south"><data key="x">100</data><data key="y">{south_y}</data></node>
    <node id="east">{east}</node>
    <edge source="north" target="south" />
    <edge source="south" target="east" />
  </graph>
</graphml>
"""
EAST = '<data key="x">300</data><data key="y">{y}</data>'


def scenario(tmp_path: Path, graph: str) -> Path:
    (tmp_path / "topo").mkdir()
    (tmp_path / "topo" / "g.graphml").write_text(graph)
    (tmp_path / "s.yaml").write_text("name: s\nduration: 1s\ntopology: topo/g.graphml\n")
    return tmp_path / "s.yaml"


def test_x_y_drawn_with_y_down_and_the_aspect_kept(tmp_path: Path) -> None:
    graph = GRAPHML.format(x="x", y="y", north_y=0, south_y=100, east=EAST.format(y=100))
    path = scenario(tmp_path, graph)
    sc = load_scenario(path, check_entries=False)
    pos = file_positions(sc, path.parent)
    assert pos is not None
    # drawing tools put y down the page: north (y=0) ends up on top
    assert pos["north"][1] > pos["south"][1]
    # 200 wide, 100 high: the same scale on both axes, centred vertically
    assert pos["south"] == [0.0, 0.25] and pos["east"] == [1.0, 0.25] and pos["north"][1] == 0.75
    assert [n["pos"] for n in topology(sc, pos)["nodes"]] == [pos[n] for n in sc.nodes]


def test_lon_lat_as_on_a_map(tmp_path: Path) -> None:
    graph = GRAPHML.format(x="lon", y="lat", north_y=50, south_y=40, east=EAST.format(y=40))
    path = scenario(tmp_path, graph.replace('key="x">300', 'key="x">110'))
    pos = file_positions(load_scenario(path, check_entries=False), path.parent)
    assert pos is not None and pos["north"][1] > pos["south"][1]


def test_a_node_without_coordinates_means_a_layout(tmp_path: Path) -> None:
    graph = GRAPHML.format(x="x", y="y", north_y=0, south_y=100, east="")
    path = scenario(tmp_path, graph)
    sc = load_scenario(path, check_entries=False)
    assert file_positions(sc, path.parent) is None
    drawn = topology(sc, None)["nodes"]
    assert {n["name"] for n in drawn} == {"north", "south", "east"}
    assert all(0.0 <= c <= 1.0 for n in drawn for c in n["pos"])


def test_fit_of_one_point() -> None:
    assert fit({"a": (5.0, 5.0)}) == {"a": [0.5, 0.5]}  # alone: in the middle
