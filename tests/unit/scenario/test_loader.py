"""Scenario files: units, validation errors with their lines, and the shipped scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.scenario.loader import ScenarioError, load_scenario, parse_scenario
from icn.units import parse_duration, parse_probability, parse_rate

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"

BASE = """\
name: t
nodes:
  a: {}
  b: {}
links:
  - {between: [a, b], delay: 5ms}
"""


def problems(text: str, check_entries: bool = False) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", check_entries=check_entries)
    return [p.format("s.yaml") for p in info.value.problems]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("250ms", 0.25),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("100us", 1e-4),
        (3, 3.0),
        ("0.5", 0.5),
        ("90d", 90 * 86400.0),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "bps"),
    [("10Mbit", 1e7), ("1Gbps", 1e9), ("500kbit", 5e5), ("10Mbit/s", 1e7), (1000, 1000.0)],
)
def test_rates(text: object, bps: float) -> None:
    assert parse_rate(text) == pytest.approx(bps)


def test_probabilities() -> None:
    assert parse_probability("5%") == pytest.approx(0.05)
    assert parse_probability(0.05) == pytest.approx(0.05)
    for bad in ("150%", "-1%", "5 percent", True):
        with pytest.raises(ValueError):
            parse_probability(bad)


def test_a_valid_file_parses() -> None:
    sc = parse_scenario(BASE, check_entries=False)
    assert sc.links[0].delay == pytest.approx(0.005)
    assert sc.backend == "local" and sc.routes == "auto"


def test_unknown_field_in_link() -> None:
    text = BASE.replace("{between: [a, b], delay: 5ms}", "{between: [a, b], delai: 5ms}")
    (msg,) = problems(text)
    assert msg.startswith("s.yaml:6:23: links[0].delai: unknown field 'delai'")
    assert "(did you mean 'delay'? valid fields: between, cost, delay, jitter," in msg


def test_unknown_top_level_field() -> None:
    (msg,) = problems(BASE + "durations: 5s\n")
    assert msg.startswith("s.yaml:7:1: durations: unknown field")
    assert "did you mean 'duration'?" in msg


def test_link_to_a_missing_node() -> None:
    (msg,) = problems(BASE + "  - {between: [b, z]}\n")
    assert msg == "s.yaml:7:19: links[1].between[1]: no node named 'z'; the nodes are a, b"


def test_missing_node_in_workload_and_missing_field() -> None:
    text = BASE + "workloads:\n  - {name: w, node: q, entry: 'apps.workloads:consumer'}\n"
    text += "  - {name: v, entry: 'apps.workloads:consumer'}\n"
    msgs = problems(text)
    assert msgs == ["s.yaml:9:5: workloads[1].node: missing required field 'node'"]
    (msg,) = problems(text.replace("  - {name: v, entry: 'apps.workloads:consumer'}\n", ""))
    assert msg == "s.yaml:8:15: workloads[0].node: no node named 'q'; the nodes are a, b"


def test_missing_nodes_section() -> None:
    (msg,) = problems("name: t\n")
    assert msg == "s.yaml:1:1: nodes: missing required field 'nodes'"


@pytest.mark.parametrize(
    ("field", "value", "expect"),
    [
        ("delay", "5 parsecs", "unknown time unit 'parsecs'"),
        ("delay", "fast", "is not a duration"),
        ("loss", "150%", "outside 0%..100%"),
        ("rate", "10 furlongs", "unknown rate unit 'furlongs'"),
        ("transport", "quic", "Input should be 'udp' or 'tcp'"),
    ],
)
def test_bad_units_name_the_field_and_line(field: str, value: str, expect: str) -> None:
    text = BASE.replace("delay: 5ms}", f"{field}: {value!r}}}")
    (msg,) = problems(text)
    assert msg.startswith(f"s.yaml:6:23: links[0].{field}: ")
    assert expect in msg


def test_faults_need_one_action_and_real_targets() -> None:
    text = BASE + "faults:\n  - {at: 2s, kill: a, cut: [a, b]}\n"
    (msg,) = problems(text)
    assert "exactly one of kill, restart, cut, restore, shape, signal (got kill, cut)" in msg
    assert msg.startswith("s.yaml:8:5: faults[0]")
    text = BASE.replace("  b: {}\n", "  b: {}\n  c: {}\n") + "faults:\n  - {at: 2s, cut: a-c}\n"
    (msg,) = problems(text)
    assert msg == "s.yaml:9:14: faults[0].cut: no link between a and c; add it under links"
    (msg,) = problems(BASE + "faults:\n  - {at: 20s, kill: a}\n")
    assert msg == "s.yaml:8:6: faults[0].at: at or after the end of the run (10s)"


def test_a_signal_fault_names_a_process() -> None:
    (msg,) = problems(BASE + "faults:\n  - {at: 2s, signal: a}\n")
    assert msg == (
        "s.yaml:8:14: faults[0].signal: a is a node; signal names a service or a workload "
        "(a process)"
    )
    (msg,) = problems(BASE + "faults:\n  - {at: 2s, signal: nobody}\n")
    assert "no node, service or workload named 'nobody'" in msg


def test_shape_fault_needs_values() -> None:
    (msg,) = problems(BASE + "faults:\n  - {at: 2s, shape: [a, b]}\n")
    assert "needs at least one of delay, jitter, loss, rate" in msg
    (msg,) = problems(BASE + "faults:\n  - {at: 2s, kill: a, loss: 5%}\n")
    assert "loss: only a 'shape' fault changes a link" in msg


def test_explicit_routes_need_neighbors() -> None:
    text = BASE.replace("  b: {}\n", "  b: {}\n  c: {}\n")
    text += "routes:\n  - {node: a, prefix: /x, via: c}\n  - {node: a, prefix: nope, via: b}\n"
    msgs = problems(text)
    assert any(m.startswith("s.yaml:10:15: routes[1].prefix:") and "/app/data" in m for m in msgs)
    # once the prefix is fixed the missing neighbor is reported
    (msg,) = problems(text.replace("prefix: nope", "prefix: /y"))
    assert msg == "s.yaml:9:27: routes[0].via: c is not a neighbor of a"


def test_duplicate_yaml_keys_and_duplicate_links() -> None:
    text = "name: t\nnodes:\n  a: {}\n  a: {}\n  b: {}\n"
    (msg,) = problems(text)
    assert msg == (
        "s.yaml:4:3: nodes.a: appears twice in the same mapping (first at line 3); keep one"
    )
    (msg,) = problems(BASE + "  - {between: [b, a]}\n")
    assert "already linked by links.0" in msg


def test_forwarder_settings_checked_and_launcher_fields_refused() -> None:
    text = BASE.replace("  a: {}\n", "  a: {forwarder: {listen: {udp: []}}}\n")
    (msg,) = problems(text)
    assert "listen: set by the launcher" in msg and msg.startswith("s.yaml:3:7:")
    text = BASE.replace("  a: {}\n", "  a: {forwarder: {tables: {cs_max_entrys: 5}}}\n")
    (msg,) = problems(text)
    assert "cs_max_entrys" in msg


def test_entries_are_imported() -> None:
    text = BASE + "services:\n  - {name: p, node: a, entry: 'apps.nothere:f'}\n"
    text += "  - {name: q, node: a, entry: 'apps.workloads:nothing'}\n  - {name: r, node: a}\n"
    msgs = problems(text.replace("  - {name: r, node: a}\n", ""), check_entries=True)
    assert msgs == [
        "s.yaml:8:24: services[0].entry: cannot import apps.nothere: No module named "
        "'apps.nothere'",
        "s.yaml:9:24: services[1].entry: apps.workloads has no function 'nothing'",
    ]
    (msg,) = problems(BASE + "services:\n  - {name: p, node: a, entry: 'not an entry'}\n")
    assert "is not module:function" in msg


def test_expectations_refer_to_workloads() -> None:
    text = BASE + "report:\n  expect:\n    - {workload: w, min_success_ratio: 99%}\n"
    (msg,) = problems(text)
    assert (
        msg
        == "s.yaml:9:8: report.expect[0].workload: no workload named 'w'; the workloads are none"
    )
    (msg,) = problems(BASE + "report:\n  expect:\n    - {workload: w}\n")
    assert "needs at least one of" in msg


def test_not_yaml_and_not_a_mapping() -> None:
    (msg,) = problems("name: [unclosed\n")
    assert msg.startswith("s.yaml:2:1: (top level): not valid YAML")
    (msg,) = problems("- a\n- b\n")
    assert "the top level must be a mapping" in msg


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read the file"):
        load_scenario(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_validate(path: Path) -> None:
    sc = load_scenario(path)
    shows = sc.report.expect or sc.report.invariants
    assert sc.workloads and shows, "every shipped scenario states what it shows"


def test_names_must_be_identifiers() -> None:
    text = (
        "name: t\nnodes:\n  a: {}\n  9b: {}\nworkloads:\n  - {name: 'x y', node: a, entry: 'a:b'}\n"
    )
    assert problems(text) == [
        "s.yaml:4:3: nodes.9b: '9b': use a letter then letters, digits, - or _ (32 at most)",
        "s.yaml:6:6: workloads[0].name: 'x y': use a letter then letters, digits, - or _ "
        "(32 at most)",
    ]
