"""``metrics:`` in a scenario: every forwarder's config gets /metrics on its node's address,
the run writes Prometheus' file-based discovery targets, and mistakes name their field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from apps.scenario.loader import parse_scenario
from apps.scenario.runner import TARGETS_FILE, ScenarioRunner
from icn.errors import ConfigError

TEXT = """
name: obs
nodes: {a: {}, b: {}, c: {}}
links: [{between: [a, b]}, {between: [b, c]}]
metrics: {port: 9555}
"""
SERVICES = """
services: [{name: p, node: c, entry: apps.workloads:producer, args: {prefix: /p}}]
workloads: [{name: w, node: a, entry: apps.workloads:consumer, args: {prefix: /p}}]
"""


def test_metrics_on_each_address_and_a_targets_file(tmp_path: Path) -> None:
    sc = parse_scenario(TEXT, check_entries=False)
    runner = ScenarioRunner(sc, tmp_path)
    cfg = {n: yaml.safe_load(runner._write_config(n).read_text()) for n in sc.nodes}
    hosts = {n: runner.backend.listen_hosts(n)[0] for n in sc.nodes}
    assert len(set(hosts.values())) == 3  # one address a node: the one port never collides
    assert {n: c["metrics"]["listen"] for n, c in cfg.items()} == {
        n: f"{h}:9555" for n, h in hosts.items()
    }
    path = runner.write_targets()
    assert path == tmp_path / TARGETS_FILE
    targets = json.loads(path.read_text())
    assert [t["targets"] for t in targets] == [[f"{hosts[n]}:9555"] for n in "abc"]
    assert targets[0]["labels"] == {
        "node": "a",
        "kind": "forwarder",
        "process": "a",
        "scenario": "obs",
        "run": runner.run_id,
    }


def test_services_and_workloads_bind_their_own_port_and_are_listed(tmp_path: Path) -> None:
    sc = parse_scenario(TEXT + SERVICES, check_entries=False)
    runner = ScenarioRunner(sc, tmp_path)
    spec = json.loads(runner._spec_file(sc.workloads[0], "workload", 1.0).read_text())
    assert spec["metrics_host"] == runner.backend.listen_hosts("a")[0]
    runner.proc_targets["p"] = ("c", "service", "127.0.0.3:41234")
    targets = json.loads(runner.write_targets().read_text())
    assert targets[-1] == {
        "targets": ["127.0.0.3:41234"],
        "labels": {
            "node": "c",
            "kind": "service",
            "process": "p",
            "scenario": "obs",
            "run": runner.run_id,
        },
    }
    runner.proc_targets["p"] = ("c", "service", "127.0.0.3:41999")  # restarted elsewhere
    assert json.loads(runner.write_targets().read_text())[-1]["targets"] == ["127.0.0.3:41999"]
    assert not list(tmp_path.glob("*.tmp"))


def test_no_block_no_metrics(tmp_path: Path) -> None:
    sc = parse_scenario(TEXT.replace("metrics: {port: 9555}\n", ""), check_entries=False)
    runner = ScenarioRunner(sc, tmp_path)
    assert "metrics" not in yaml.safe_load(runner._write_config("a").read_text())
    assert runner.metrics_target("a") is None


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ("metrics: {port: 0}", r":3:11: metrics\.port"),
        ("metrics: {prot: 9400}", r"metrics\.prot"),
        ("backend: ray\nmetrics: {}", r"metrics.*local and netns backends"),
    ],
)
def test_mistakes_name_the_field(block: str, words: str) -> None:
    text = "name: obs\nnodes: {a: {}}\n" + block + "\n"
    with pytest.raises(ConfigError, match=words):
        parse_scenario(text, check_entries=False)
