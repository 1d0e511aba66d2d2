"""Tasks on real executors: results by name, references passed on unfetched, placement by
where the input is, clear errors naming the task, and results answered by the network for a
second caller."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess

import pytest

import compute.tasks as tasks
from apps.procs import icn_argv
from compute.tasks.executor import LOAD_FRESHNESS_MS
from compute.tasks.runtime import Runtime
from icn.errors import ConfigError
from tests.integration.tasks import task_funcs as f
from tests.integration.tasks.conftest import MODULE, Cluster, driving
from tests.waiting import wait_until


async def test_a_reference_is_passed_on_by_name_and_its_result_read_once(two: Runtime) -> None:
    inner = f.add.remote(1, 2)
    outer = f.add.remote(inner, f.add.remote(3, 4))
    assert await outer == 10
    assert inner.name.startswith("/cfn/obj/") and await inner == 3
    assert await tasks.get_async([f.square.remote(i) for i in range(5)]) == [0, 1, 4, 9, 16]
    assert len(set(await tasks.get_async([f.where.remote() for _ in range(30)]))) == 2


async def test_a_task_goes_where_its_largest_input_is(two: Runtime, cluster: Cluster) -> None:
    """Placement by locality: the length of a 1 MiB blob is computed by the executor that
    made the blob, so no byte of it crosses the network (each executor's counters say)."""
    for _ in range(3):
        data = f.blob.remote(1 << 20)
        assert await f.length.remote(data) == 1 << 20
    statuses = [await two.client.call(f"/cfn/node/{n}/status") for n in ("n1", "n2")]
    fetched = sum(s["counters"].get("arg_bytes_fetched", 0) for s in statuses)
    local = sum(s["counters"].get("arg_bytes_local", 0) for s in statuses)
    assert fetched == 0 and local >= 3 << 20
    assert two.placement.chosen_for_locality >= 3


async def test_an_input_elsewhere_is_fetched_by_name_and_counted(cluster: Cluster) -> None:
    """With the holder full of work, the task runs on the other executor, which fetches its
    input by name with a hint toward the holder: the bytes moved are counted there."""
    cluster.start_executor("n1")
    async with driving(cluster) as runtime:
        data = f.blob.remote(1 << 20)
        await runtime.wait_async([data])
        cluster.start_executor("n2")
        await runtime.refresh()
        runtime.placement.executors["n1"].passed_until = math.inf  # only n2 may take it
        assert await f.length.remote(data) == 1 << 20
        status = await runtime.client.call("/cfn/node/n2/status")
        assert status["counters"]["arg_bytes_fetched"] >= 1 << 20


async def test_errors_name_the_task(two: Runtime) -> None:
    with pytest.raises(tasks.TaskError, match=r"task_funcs:fails: ValueError: no good: 3") as err:
        await f.fails.remote(3)
    assert err.value.remote_type == "ValueError" and "raise ValueError" in err.value.traceback
    with pytest.raises(ConfigError, match=r"task_funcs:add: missing a required argument: 'b'"):
        f.add.remote(1)
    with pytest.raises(tasks.TaskError, match=r"task_funcs:add: .*cannot serialize"):
        f.add.remote(object(), 1)
    with pytest.raises(tasks.TaskError, match=r"task_funcs:add: .*TypeError"):
        await f.add.remote("a", 1)  # the task itself raised: its exception, named


async def test_a_second_caller_gets_results_from_the_network(
    two: Runtime, cluster: Cluster
) -> None:
    """A deterministic call is named by its lineage: a second caller's overlapping job is
    answered by the forwarder's content store for every call the first one made (10 of its 20),
    and those tasks do not run again."""
    first = [f.square.remote(i) for i in range(10)]
    assert await tasks.get_async(first) == [i * i for i in range(10)]
    other = await Runtime.connect(cluster.uri)
    try:
        refs = [other.submit(f.square.spec, (i,), {}) for i in range(20)]
        values = [await other.get_async(r) for r in refs]
    finally:
        await other.close()
    assert values == [i * i for i in range(20)]
    share = other.counters["from_network"] / len(refs)
    assert share >= 0.4, other.counters
    assert sum(r.from_network for r in refs[:10]) == 10
    for i in range(10):  # each ran once, for the first caller
        assert len(cluster.runs_of(f"square{i}")) == 1


async def test_an_object_put_by_the_caller_is_fetched_from_it_by_name(two: Runtime) -> None:
    data = tasks.put(bytes(200_000))
    assert data.holders == [f"/cfn/driver/{two.driver_id}"]
    assert await f.length.remote(data) == 200_000
    assert await data == bytes(200_000)  # read back here without the network
    assert set(two.placement.executors) == {"n1", "n2"}  # a caller is never taken for one


async def test_a_quick_task_runs_on_the_executors_loop_a_slow_one_in_a_slot_thread(
    cluster: Cluster,
) -> None:
    """A task that has taken under half a millisecond runs on the event loop (the hop to a
    pool thread and back cost more than it); one that takes longer keeps to a thread, so the
    executor goes on answering while it runs."""
    cluster.start_executor("n1")
    async with driving(cluster):
        first = await f.thread_name.remote()
        assert first.startswith("task")  # not yet learnt
        later = [await f.thread_name.remote() for _ in range(5)]
        assert later[-1] == "MainThread"
        assert await f.thread_name.remote(0.01) == "MainThread"  # (learnt: quick)
        slow = [await f.thread_name.remote(0.01) for _ in range(8)]
        assert slow[-1].startswith("task")  # learnt again: slow


async def test_resource_requests_are_honoured_and_an_impossible_one_fails_at_once(
    cluster: Cluster,
) -> None:
    small = cluster.start_executor("small", "--memory-mb", "64")
    big = cluster.start_executor("big", "--memory-mb", "2048", "--num-cpus", "2")
    async with driving(cluster) as runtime:
        await wait_until(lambda: len(runtime.placement.executors) == 2, timeout=10)
        pids = await tasks.get_async([f.needs_a_gib.remote() for _ in range(6)])
        assert set(pids) == {big.pid}  # 1 GiB asked: only "big" has it
        assert small.pid in set(await tasks.get_async([f.where.remote() for _ in range(20)]))
        with pytest.raises(tasks.TaskError, match=r"no executor can run it: it needs 4 CPUs"):
            await f.where.options(num_cpus=4).remote()


async def test_a_cancelled_call_says_so_and_its_executor_counts_it_until_it_ends(
    two: Runtime, cluster: Cluster
) -> None:
    """A task already running cannot be stopped (it is a thread): the caller gets "cancelled"
    at once, and the executor keeps its slot and its load until the thread ends, so the next
    call goes to the other executor rather than queueing behind it."""
    slow = f.slow_square.remote(5, 3.0)
    await wait_until(lambda: cluster.runs_of("slow5"), timeout=10)
    tasks.cancel(slow)
    with pytest.raises(tasks.TaskError, match="cancelled"):
        await slow
    [pid] = cluster.runs_of("slow5")
    busy = next(n for n, c in cluster.executors.items() if c.pid == pid)
    for _ in range(100):  # (the cancel reaches the executor in a moment, after the caller)
        status = await two.client.call(f"/cfn/node/{busy}/status")
        if status["counters"].get("cancelled_running"):
            break
        await asyncio.sleep(0.02)
    assert status["in_progress"] == 1 and status["counters"]["cancelled_running"] == 1
    # its load as the runtime reads it, once the content store's copy (fresh for
    # LOAD_FRESHNESS_MS, read before the task began) has gone stale
    await asyncio.sleep(LOAD_FRESHNESS_MS / 1000 + 0.05)
    await two.refresh()
    other = f.add.remote(1, 1)
    assert await other == 2 and other.holders != [f"/cfn/node/{busy}"]


def test_icn_tasks_status_lists_the_executors(cluster: Cluster) -> None:
    cluster.start_executor("n1", "--num-cpus", "2")
    proc = subprocess.run(
        [*icn_argv("tasks", "status", "--json", "--transport", cluster.uri)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (n1,) = json.loads(proc.stdout)
    assert n1["node"] == "n1" and n1["num_cpus"] == 2 and n1["modules"] == [MODULE]
    text = subprocess.run(
        [*icn_argv("tasks", "status", "--transport", cluster.uri)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert text.splitlines()[0].split()[:3] == ["executor", "cpus", "load"]
    assert text.splitlines()[1].split()[:2] == ["n1", "2"]


async def test_an_actor_call_whose_argument_failed_does_not_hold_up_the_next(
    two: Runtime,
) -> None:
    """Calls run in their order: a call whose argument's task failed fails (named), and its
    turn passes, so the calls after it run (they waited for it at the executor before)."""
    tally = f.Tally.remote(0)
    bad = f.fails.remote(1)
    first = tally.add.remote(bad)
    later = [tally.add.remote(1) for _ in range(40)]  # more than the window of 32
    with pytest.raises(tasks.TaskError, match=r"task_funcs:Tally\.add"):
        await first
    assert await asyncio.wait_for(tasks.get_async(later), 30) == list(range(1, 41))
