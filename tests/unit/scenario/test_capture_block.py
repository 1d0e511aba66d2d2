"""``capture:`` in a scenario: the chosen nodes' forwarder configs get a pcapng file under the
run's directory; mistakes name their line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from apps.scenario.loader import parse_scenario
from apps.scenario.runner import ScenarioRunner
from icn.errors import ConfigError

TEXT = """
name: obs
nodes: {a: {}, b: {}, c: {}}
links: [{between: [a, b]}, {between: [b, c]}]
capture: {nodes: [a, c], max_bytes: 1048576}
"""


def test_configs_get_a_capture_per_chosen_node(tmp_path: Path) -> None:
    sc = parse_scenario(TEXT, check_entries=False)
    runner = ScenarioRunner(sc, tmp_path)
    for node in sc.nodes:
        runner._write_config(node)
    cfg = {n: yaml.safe_load((tmp_path / "config" / f"{n}.yaml").read_text()) for n in sc.nodes}
    assert cfg["a"]["capture"] == {
        "file": str(tmp_path / "pcap" / "a.pcapng"),
        "max_bytes": 1048576,
        "files": 2,
    }
    assert cfg["c"]["capture"]["file"] == str(tmp_path / "pcap" / "c.pcapng")
    assert "capture" not in cfg["b"]
    assert (tmp_path / "pcap").is_dir()  # made before the forwarder opens its file there


def test_all_nodes_by_default(tmp_path: Path) -> None:
    sc = parse_scenario(TEXT.replace("nodes: [a, c], ", ""), check_entries=False)
    runner = ScenarioRunner(sc, tmp_path)
    files = []
    for node in sc.nodes:
        cfg = yaml.safe_load(runner._write_config(node).read_text())
        files.append(cfg["capture"]["file"])
    assert files == [str(tmp_path / "pcap" / f"{n}.pcapng") for n in "abc"]


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ("capture: {nodes: [a, x]}", r":3:22: capture\.nodes\[1\]: no node named 'x'"),
        ("capture: {max_bytes: 10}", r"capture\.max_bytes"),
        ("capture: {nodes: some}", r"capture\.nodes"),
        ("capture: {file: a.pcap}", r"capture\.file"),
    ],
)
def test_mistakes_name_the_field(block: str, words: str) -> None:
    text = "name: obs\nnodes: {a: {}}\n" + block + "\n"
    with pytest.raises(ConfigError, match=words):
        parse_scenario(text, check_entries=False)
