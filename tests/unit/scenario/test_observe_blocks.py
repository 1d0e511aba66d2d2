"""``capture:`` and ``metrics:`` in a scenario: what each node's forwarder config gets, the
Prometheus targets file, and the errors a mistake in either gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.scenario.loader import parse_scenario
from apps.scenario.runner import TARGETS_FILE, ScenarioRunner
from icn.errors import ConfigError

TEXT = """
name: obs
nodes: {a: {}, b: {}, c: {}}
links: [{between: [a, b]}, {between: [b, c]}]
capture: {nodes: [a, c], max_bytes: 1048576}
metrics: {port: 9555}
"""


def test_configs_get_a_capture_per_chosen_node_and_metrics_on_each_address(
    tmp_path: Path,
) -> None:
    import yaml

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
    assert "capture" not in cfg["b"]
    hosts = {n: runner.backend.listen_hosts(n)[0] for n in sc.nodes}
    assert {n: c["metrics"]["listen"] for n, c in cfg.items()} == {
        n: f"{h}:9555" for n, h in hosts.items()
    }
    targets = json.loads(runner.write_targets().read_text())
    assert runner.write_targets().name == TARGETS_FILE
    assert [t["targets"] for t in targets] == [[f"{hosts[n]}:9555"] for n in "abc"]
    assert targets[0]["labels"] == {
        "node": "a",
        "kind": "forwarder",
        "scenario": "obs",
        "run": runner.run_id,
    }


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ("capture: {nodes: [a, x]}", r":3: capture\.nodes\[1\]: no node named 'x'"),
        ("capture: {max_bytes: 10}", r"capture\.max_bytes"),
        ("capture: {nodes: some}", r"capture\.nodes"),
        ("metrics: {port: 0}", r"metrics\.port"),
        ("metrics: {prot: 9400}", r"metrics\.prot"),
        ("backend: ray\nmetrics: {}", r"metrics.*local and netns backends"),
    ],
)
def test_mistakes_name_the_field(block: str, words: str) -> None:
    text = "name: obs\nnodes: {a: {}}\n" + block + "\n"
    with pytest.raises(ConfigError, match=words):
        parse_scenario(text, check_entries=False)
