"""Packing nodes into processes and waiting for many forwarders, without starting any: the
groups, the automatic choice, netns's refusal (naming the field and its line), the timeout that
grows with the nodes, and the start-up error that names the nodes ready and not."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.scenario import packing
from apps.scenario.forwarders import NodeForwarder, NotReady, await_ready
from apps.scenario.loader import load_scenario, parse_scenario
from apps.scenario.runner import ScenarioRunner
from icn.errors import ConfigError

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def test_groups_are_even_and_in_order() -> None:
    nodes = [f"n{i}" for i in range(100)]
    groups = packing.plan_groups(nodes, 30)
    assert [len(g) for g in groups] == [25, 25, 25, 25]
    assert [n for g in groups for n in g] == nodes
    assert [len(g) for g in packing.plan_groups(nodes[:7], 3)] == [3, 2, 2]
    assert packing.plan_groups(nodes[:5], 1) == [[n] for n in nodes[:5]]
    assert packing.plan_groups(nodes[:3], 25) == [nodes[:3]]


def test_automatic_packing_above_the_threshold_and_local_only() -> None:
    small, big = packing.AUTO_PACK_ABOVE, packing.AUTO_PACK_ABOVE + 1
    assert packing.per_process(None, small, "local") == 1
    assert packing.per_process(None, big, "local") == packing.AUTO_NODES_PER_PROCESS
    assert packing.per_process(None, 200, "netns") == 1
    assert packing.per_process(1, 200, "local") == 1  # a process per node stays available
    assert packing.per_process(4, 3, "local") == 4
    assert packing.per_process(1, 200, "netns") == 1
    with pytest.raises(ValueError, match="nodes_per_process: 4: the netns backend"):
        packing.per_process(4, 10, "netns")


def test_netns_refuses_packing_naming_the_field_and_line() -> None:
    text = "name: s\nbackend: netns\nnodes_per_process: 4\nnodes: {a: {}, b: {}}\n"
    with pytest.raises(ConfigError) as err:
        parse_scenario(text, "s.yaml", check_entries=False)
    msg = str(err.value)
    assert "s.yaml:3:1: nodes_per_process: the netns backend runs one node per process" in msg
    assert "set nodes_per_process: 1, or use backend: local" in msg
    ok = parse_scenario(text.replace("4", "1"), "s.yaml", check_entries=False)
    assert ok.nodes_per_process == 1


def test_a_packed_file_run_on_netns_is_refused_before_anything_starts(tmp_path: Path) -> None:
    sc = parse_scenario("name: s\nnodes_per_process: 4\nnodes: {a: {}}\n", check_entries=False)
    with pytest.raises(ConfigError, match=r"^nodes_per_process: 4: the netns backend runs one"):
        ScenarioRunner(sc, tmp_path, backend="netns", run_id="abc123")
    assert not list(tmp_path.iterdir())


def test_the_shipped_hundred_nodes_are_packed(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "line-100.yaml")
    runner = ScenarioRunner(sc, tmp_path, run_id="abc123")
    assert runner.per_process == packing.AUTO_NODES_PER_PROCESS
    assert [len(g) for g in runner.groups] == [25, 25, 25, 25]


def test_the_timeout_grows_with_nodes_and_processes() -> None:
    one = packing.ready_timeout(1, 1)
    assert one >= packing.READY_TIMEOUT_BASE
    assert packing.ready_timeout(100, 100) > packing.ready_timeout(100, 4) > one
    assert packing.ready_timeout(60, 60) > 45  # the 60 processes that did not start in 20 s


class Fake(NodeForwarder):
    """Ready after ``after`` polls, never (None), or failing at its first poll (``fails``)."""

    def __init__(self, node: str, after: int | None = 0, fails: str | None = None) -> None:
        self.node = self.name = node
        self.after, self.fails, self.polls = after, fails, 0

    @property
    def pid(self) -> int:
        return 1

    def poll_ready(self) -> bool:
        self.polls += 1
        if self.fails is not None:
            raise RuntimeError(self.fails)
        return self.after is not None and self.polls > self.after

    def running(self) -> bool:
        return True

    def exit_code(self) -> int | None:
        return None

    def output(self) -> str:
        return ""

    def errors(self) -> str:
        return ""

    async def kill(self) -> None:
        pass

    async def counters(self) -> dict[str, int]:
        return {}


async def test_all_ready_together() -> None:
    fakes = [Fake("a"), Fake("b", after=2), Fake("c", after=1)]
    await await_ready(fakes, timeout=5.0)
    assert [f.polls for f in fakes] == [1, 3, 2]  # one poll over all of them, each round


async def test_the_error_names_those_ready_and_those_not() -> None:
    fakes = [Fake("a"), Fake("b", after=None), Fake("c"), Fake("d", after=None)]
    with pytest.raises(NotReady) as err:
        await await_ready(fakes, timeout=0.15)
    assert err.value.ready == ["a", "c"] and err.value.not_ready == ["b", "d"]
    assert str(err.value) == "2 of 4 forwarders ready; not ready within 0.15 s: b, d"


async def test_a_forwarder_that_dies_ends_the_wait_at_once_with_its_reason() -> None:
    fakes = [Fake("a"), Fake("b", after=None), Fake("c", fails="fwd-c exited with 2:\nboom")]
    with pytest.raises(NotReady) as err:
        await await_ready(fakes, timeout=60.0)  # not waited for
    assert err.value.not_ready == ["b", "c"]
    assert str(err.value) == (
        "1 of 3 forwarders ready; still starting: b; failed: c\nc: fwd-c exited with 2:\nboom"
    )
