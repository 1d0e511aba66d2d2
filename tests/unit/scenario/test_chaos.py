"""The chaos block: validation naming the field and the fix, and its seeded expansion into
timed faults (deterministic for a seed, only eligible targets, no overlap on one scope)."""

from __future__ import annotations

import pytest

from apps.scenario.chaos import SETTLE, episodes, plan_lines
from apps.scenario.loader import ScenarioError, parse_scenario
from apps.scenario.schema import Scenario

BASE = """\
name: t
duration: 300s
nodes: {a: {}, b: {}, c: {}, d: {}}
links:
  - {between: [a, b]}
  - {between: [b, c]}
  - {between: [c, d], loss: 1%}
  - {between: [d, a]}
services:
  - {name: svc-b, node: b, entry: 'apps.workloads:producer'}
  - {name: svc-c, node: c, entry: 'apps.workloads:producer'}
  - {name: co-c, node: c, entry: 'apps.workloads:producer', colocate: true}
workloads:
  - {name: w, node: a, entry: 'apps.workloads:consumer'}
"""

CHAOS = """\
chaos:
  seed: 7
  start: 10s
  end: 280s
  interval: [5s, 15s]
  kinds: [node_kill_restart, service_kill_restart, link_cut, loss]
  nodes: [b, c]
  services: [svc-b, svc-c]
  links: [a-b, [b, c], c-d]
  down_for: [2s, 6s]
  loss_for: 10s
"""


def parse(text: str) -> Scenario:
    return parse_scenario(text, "s.yaml", check_entries=False)


def problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", check_entries=False)
    return [p.format("s.yaml") for p in info.value.problems]


def chaos(**changes: str) -> str:
    """BASE with the chaos block, some of its lines replaced (``key: value``)."""
    lines = CHAOS.splitlines()
    for key, value in changes.items():
        lines = [f"  {key}: {value}" if ln.startswith(f"  {key}:") else ln for ln in lines]
        if not any(ln.startswith(f"  {key}:") for ln in lines):
            lines.append(f"  {key}: {value}")
    return BASE + "\n".join(ln for ln in lines if not ln.endswith(": DROP")) + "\n"


def test_the_same_seed_gives_the_same_faults_and_another_seed_others() -> None:
    one, two = parse(chaos()), parse(chaos())
    assert one.faults == two.faults and len(one.faults) >= 20
    assert plan_lines(one) == plan_lines(two)
    assert parse(chaos(seed="8")).faults != one.faults


def test_episodes_use_only_eligible_targets_inside_the_span() -> None:
    sc = parse(chaos())
    eps = episodes(sc)
    assert {e.kind for e in eps} == {
        "node_kill_restart",
        "service_kill_restart",
        "link_cut",
        "loss",
    }
    for e in eps:
        assert 10.0 < e.start < e.end < 280.0
        if e.kind == "node_kill_restart":
            assert e.target in ("b", "c") and 2.0 <= e.end - e.start <= 6.0
        elif e.kind == "service_kill_restart":
            assert e.target in ("svc-b", "svc-c")
        else:
            assert e.target in (("a", "b"), ("b", "c"), ("c", "d"))
        if e.kind == "loss":
            assert e.end - e.start == pytest.approx(10.0)


def test_episodes_on_one_scope_never_overlap() -> None:
    """A node's kill holds its services and links: nothing on them is faulted meanwhile."""
    for seed in range(5):
        eps = episodes(parse(chaos(seed=str(seed), interval="[1s, 3s]")))
        for i, e in enumerate(eps):
            for f in eps[i + 1 :]:
                if e.scope & f.scope:
                    assert f.start >= e.end + SETTLE, (e, f)


def test_expanded_faults_are_ordinary_faults_in_pairs() -> None:
    sc = parse(chaos())
    assert len(sc.faults) == 2 * len(episodes(sc))
    assert [f.at for f in sc.faults] == sorted(f.at for f in sc.faults)
    by_action = {f.action for f in sc.faults}
    assert by_action == {"kill", "restart", "cut", "restore", "shape"}
    shapes = [f for f in sc.faults if f.action == "shape"]
    # a loss episode raises the loss to 5%, then sets the link's own back
    assert {f.loss for f in shapes} <= {0.05, 0.0, 0.01}
    assert sum(1 for f in shapes if f.loss == 0.05) == len(shapes) // 2


def test_faults_written_by_hand_stay_first() -> None:
    text = chaos().replace("chaos:\n", "faults:\n  - {at: 1s, kill: svc-b}\nchaos:\n")
    sc = parse(text)
    assert sc.faults[0].at == 1.0 and sc.faults[0].describe() == "kill svc-b"
    assert sc.chaos is not None


def test_the_plan_is_printed_one_episode_a_line() -> None:
    sc = parse(chaos())
    lines = plan_lines(sc)
    assert lines[0].startswith(f"chaos (seed 7): {len(episodes(sc))} episodes, ")
    assert any("node_kill_restart b" in ln or "node_kill_restart c" in ln for ln in lines[1:])


@pytest.mark.parametrize(
    ("changes", "expect"),
    [
        ({"nodes": "[b, x]"}, "s.yaml:21:14: chaos.nodes[1]: no node named 'x'; the nodes are"),
        (
            {"nodes": "[a]"},
            "chaos.nodes[0]: node a runs workloads (w), which a node kill stops for good",
        ),
        ({"services": "[svc-b, nope]"}, "chaos.services[1]: no service named 'nope'"),
        ({"services": "[co-c]"}, "chaos.services[0]: co-c is co-located with node c"),
        ({"links": "[a-c]"}, "chaos.links[0]: no link between a and c; add it under links"),
        ({"links": "[a-b, b-a]"}, "chaos.links[1]: b-a is listed twice"),
        ({"nodes": "DROP"}, "chaos.nodes: node_kill_restart is in kinds but no node is eligible"),
        (
            {"kinds": "[loss]"},
            "chaos.nodes: listed, but no kind uses them; add node_kill_restart to kinds",
        ),
        ({"kinds": "[loss, loss]"}, "chaos.kinds: loss listed twice; list each kind once"),
        ({"kinds": "[explode]"}, "chaos.kinds[0]: Input should be 'node_kill_restart'"),
        ({"kinds": "[]"}, "chaos.kinds: List should have at least 1 item"),
        ({"interval": "[10s, 5s]"}, "chaos.interval: [10s, 5s]: the first bound is above"),
        ({"interval": "0s"}, "chaos.interval: must be above 0"),
        ({"down_for": "[1 parsec, 2s]"}, "chaos.down_for[0]: '1 parsec': unknown time unit"),
        ({"loss": "0%"}, "chaos.loss: a loss episode needs some loss, e.g. loss: 5%"),
        ({"end": "400s"}, "chaos.end: 400s is after the end of the run (300s)"),
        ({"start": "290s"}, "chaos.start: 290s leaves no time for an episode before the end"),
        ({"seed": "DROP"}, "chaos.seed: missing required field 'seed'"),
        ({"sed": "1"}, "chaos.sed: unknown field 'sed' (did you mean 'seed'? valid fields:"),
        ({"interval": "[280s, 300s]"}, "chaos: seed 7 draws no episode between start (10s)"),
    ],
)
def test_bad_chaos_blocks_name_the_field_and_the_fix(changes: dict[str, str], expect: str) -> None:
    if changes == {"kinds": "[loss]"}:
        changes = {**changes, "services": "DROP"}
    found = problems(chaos(**changes))
    assert any(expect in msg for msg in found), found
