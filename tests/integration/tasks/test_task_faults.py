"""Losing an executor: a task running there runs again elsewhere from its lineage, an actor
starts again elsewhere from its last saved state, and the caller's code notices neither."""

from __future__ import annotations

import asyncio

import pytest

from compute.tasks.runtime import Runtime
from tests.chaos.harness import CpuLoad
from tests.integration.tasks import task_funcs as f
from tests.integration.tasks.conftest import Cluster
from tests.waiting import wait_until


@pytest.mark.fault
async def test_a_task_whose_executor_is_killed_runs_again_elsewhere(
    two: Runtime, cluster: Cluster, cpu: CpuLoad
) -> None:
    ref = f.slow_square.remote(7, 1.0)
    await wait_until(lambda: cluster.runs_of("slow7"), timeout=cpu.budget(10))
    [pid] = cluster.runs_of("slow7")
    victim = next(n for n, c in cluster.executors.items() if c.pid == pid)
    cluster.kill(victim)  # SIGKILL mid-task, by its PID
    async with asyncio.timeout(cpu.budget(20)):
        assert await ref == 49
    runs = cluster.runs_of("slow7")
    assert len(runs) == 2 and runs[0] != runs[1]  # it ran twice, on two executors
    assert two.counters["reexecuted"] == 1
    assert ref.holders and ref.holders[0] != f"/cfn/node/{victim}"
    assert await f.slow_square.remote(7, 1.0) == 49  # the same result, from where it lives
    assert len(cluster.runs_of("slow7")) == 2


@pytest.mark.fault
async def test_a_lost_input_is_rebuilt_from_its_lineage(
    two: Runtime, cluster: Cluster, cpu: CpuLoad
) -> None:
    """The executor holding a task's input (never fetched: no copy elsewhere) dies between
    the two calls: the input's call runs again (its lineage is in the reference), then the
    task."""
    data = f.blob.remote(65536)
    await two.wait_async([data])
    [pid] = cluster.runs_of("blob65536")
    victim = next(n for n, c in cluster.executors.items() if c.pid == pid)
    cluster.kill(victim)
    async with asyncio.timeout(cpu.budget(20)):
        assert await f.length.remote(data) == 65536
    assert len(cluster.runs_of("blob65536")) == 2
    assert two.counters["arguments_rebuilt"] == 1


@pytest.mark.fault
async def test_a_result_once_fetched_outlives_its_executor_in_the_network(
    two: Runtime, cluster: Cluster, cpu: CpuLoad
) -> None:
    """A result that crossed the forwarder stays in its content store under its name: when its
    executor dies, the next task reads it from there, and nothing runs again."""
    data = f.square.remote(12)
    assert await data == 144
    [pid] = cluster.runs_of("square12")
    victim = next(n for n, c in cluster.executors.items() if c.pid == pid)
    cluster.kill(victim)
    async with asyncio.timeout(cpu.budget(20)):
        assert await f.add.remote(data, 1) == 145
    assert len(cluster.runs_of("square12")) == 1
    assert two.counters["arguments_rebuilt"] == 0


@pytest.mark.fault
async def test_an_actor_whose_executor_is_killed_resumes_from_its_last_state(
    two: Runtime, cluster: Cluster, cpu: CpuLoad
) -> None:
    tally = f.Tally.remote(100)
    assert [await tally.add.remote(k) for k in (1, 2, 3)] == [101, 103, 106]
    home = tally.node
    assert home is not None and await tally.pid.remote() == cluster.executors[home].pid
    cluster.kill(home)
    async with asyncio.timeout(cpu.budget(20)):
        assert await tally.add.remote(4) == 110  # from the state after the third call
        later = await asyncio.gather(*(tally.add.remote(1) for _ in range(5)))
    assert later == [111, 112, 113, 114, 115]  # in order, none lost or applied twice
    assert tally.node != home and two.counters["actor_restarts"] == 1
