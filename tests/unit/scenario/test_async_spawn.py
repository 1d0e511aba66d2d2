"""On the ray backend the runner starts, kills and restarts processes without stopping its
event loop: the timeline, the sampler and the monitor go on while a node agent answers.

The agent here is a plain object (as in tests/integration/scenario/test_ray_parts.py): its
answer to a start, and to a wait, comes only once the runner's loop has run a callback it
scheduled after the call began.  A call made on the loop can never see that callback run: it
waits out :data:`BLOCKED` and fails, so each test here fails, and never hangs, when a start or
a wait is made on the loop.  Nothing is bounded by the clock when it works.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.scenario.faults import apply_fault
from apps.scenario.loader import parse_scenario
from apps.scenario.ray_backend import RayBackend
from apps.scenario.ray_child import AgentMirror
from apps.scenario.runner import ScenarioRunner

# How long an agent call waits for the loop before it says the loop is blocked: only the
# failure waits it out
BLOCKED = 20.0

SCENARIO = """\
name: t
nodes:
  a: {}
workloads:
  - {name: w, node: a, entry: 'apps.workloads:consumer'}
faults:
  - {at: 0s, kill: w}
  - {at: 0s, restart: w}
duration: 600s
"""


class LoopBoundAgent:
    """A node agent (an AgentCalls) whose starts and waits answer only after the runner's loop
    has run: each such call schedules a callback on ``loop`` and waits until it has run."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.started: list[str] = []
        self.signals: list[tuple[str, int]] = []
        self.killed = threading.Event()
        self.pids = iter(range(4242, 5000))

    def _after_the_loop_ran(self, method: str) -> None:
        ran = threading.Event()
        self.loop.call_soon_threadsafe(ran.set)
        if not ran.wait(BLOCKED):
            raise TimeoutError(f"{method}: the runner's loop did not run while it waited")

    def __call__(self, method: str, *args: Any, timeout: float) -> Any:
        if method == "spawn":
            self._after_the_loop_ran(method)
            self.started.append(args[0])
            return next(self.pids)
        if method == "signal":
            self.signals.append((args[0], args[1]))
            if args[1] == signal.SIGKILL:
                self.killed.set()
            return True
        if method == "wait":
            self.killed.wait(BLOCKED)  # the kill is posted: it may come in just after the wait
            self._after_the_loop_ran(method)
            return -signal.SIGKILL
        if method == "sync":
            return {"files": {}, "exits": {}}
        raise AssertionError(f"unexpected agent call {method}")


@pytest.fixture
def mirrors() -> Iterator[list[AgentMirror]]:
    made: list[AgentMirror] = []
    yield made
    for mirror in made:
        mirror.join(1)


def ray_runner(
    tmp_path: Path,
    mirrors: list[AgentMirror],
    text: str = SCENARIO,
    agent_class: type[LoopBoundAgent] = LoopBoundAgent,
) -> tuple[ScenarioRunner, LoopBoundAgent]:
    """A runner of ``text`` on the ray backend whose node ``a`` has an ``agent_class`` agent
    (the backend's ``setup``, which joins a cluster, is not run: only what it leaves is set)."""
    sc = parse_scenario(text, "s.yaml", check_entries=False)
    runner = ScenarioRunner(sc, tmp_path, backend="ray", run_id="abc123")
    backend = runner.backend
    assert isinstance(backend, RayBackend)
    agent = agent_class(asyncio.get_running_loop())
    mirror = AgentMirror("a", agent, tmp_path)
    mirrors.append(mirror)
    backend.mirrors["a"] = mirror
    backend.remote["a"] = {"run_dir": "/remote/run", "socket": "/remote/a.sock"}
    return runner, agent


async def test_a_node_starts_and_restarts_on_ray_while_the_loop_runs(
    tmp_path: Path, mirrors: list[AgentMirror]
) -> None:
    runner, agent = ray_runner(tmp_path, mirrors)
    (first,) = await runner._launch(["a"])
    (again,) = await runner._launch(["a"])  # a restart of the node: a new process, a new log
    assert [first.name, again.name] == ["fwd-a", "fwd-a.1"] == agent.started
    assert runner.forwarders["a"] is again and [c.pid for c in runner.children] == [4242, 4243]
    assert (tmp_path / "logs" / "fwd-a.1.err").exists()


async def test_the_timeline_starts_kills_and_restarts_a_workload_on_ray_while_the_loop_runs(
    tmp_path: Path, mirrors: list[AgentMirror]
) -> None:
    runner, agent = ray_runner(tmp_path, mirrors)

    def both_faults_done() -> bool:
        faults = runner.state.faults
        return len(faults) == 2 and (faults[1]["applied"], faults[1]["error"]) != (None, None)

    runner.state.t0 = time.time()  # the run's start, as run() sets it before the timeline
    timeline = asyncio.ensure_future(runner.timeline())
    try:
        async with asyncio.timeout(3 * BLOCKED):  # only a failure waits this out
            while not both_faults_done():
                if timeline.done():
                    await timeline  # raises what ended it
                await asyncio.sleep(0.01)
    finally:
        timeline.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await timeline
    assert [e.text for e in runner.state.events] == [
        "workload w started on a",
        "fault: kill workload w",
        "workload w restarted on a",
        "fault: restart workload w",
    ]
    assert [f["error"] for f in runner.state.faults] == [None, None]
    assert agent.started == ["w", "w.1"] and agent.signals == [("w", signal.SIGKILL)]
    assert runner.procs["w"].pid == 4243 and 4242 in runner.expected_exit
    assert runner.procs["w"].stdout_path == tmp_path / "logs" / "w.1.out"


NODE_KILL = """\
name: t
nodes:
  a: {}
reconverge_after: 1s
faults:
  - {at: 0s, kill: a}
duration: 600s
"""


class SlowReapAgent(LoopBoundAgent):
    """Its wait for a killed process answers only when the test says (a loaded agent)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.reaped = threading.Event()

    def __call__(self, method: str, *args: Any, timeout: float) -> Any:
        if method == "wait":
            self.killed.wait(BLOCKED)
            self.reaped.wait(BLOCKED)
            return -signal.SIGKILL
        return super().__call__(method, *args, timeout=timeout)


async def test_a_node_kill_is_applied_and_rerouted_from_its_sigkill_not_from_its_reaping(
    tmp_path: Path, mirrors: list[AgentMirror]
) -> None:
    """A Ray agent once took 3.5 s to report a killed forwarder reaped: the fault said 7.5 s
    for a kill sent at 4 s, and the routes reacted a second after that, so the consumer lost
    4.5 s of traffic where the scenario meant 1 s (issue 34, test_failover_on_ray)."""
    runner, agent = ray_runner(tmp_path, mirrors, NODE_KILL, SlowReapAgent)
    assert isinstance(agent, SlowReapAgent)
    await runner._launch(["a"])
    runner.state.t0 = time.time() - 4.0  # the kill comes 4 s into the run
    fault = asyncio.ensure_future(apply_fault(runner, runner.sc.faults[0]))
    try:
        async with asyncio.timeout(BLOCKED):  # only a failure waits this out
            while not agent.killed.is_set():
                await asyncio.sleep(0.01)
            killed_at = runner.now()
            # the routes' reaction is on its way while the forwarder is not yet reaped
            while not runner._tasks:
                await asyncio.sleep(0.01)
            assert not fault.done() and "a" in runner.down
            await asyncio.sleep(0.2)  # the agent is slow to say the process is gone
            agent.reaped.set()
            await fault
    finally:
        agent.reaped.set()
        for task in [fault, *runner._tasks]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    (entry,) = runner.state.faults
    assert entry["error"] is None
    assert 4.0 <= entry["applied"] <= killed_at  # when the SIGKILL went, not 0.2 s later
    assert [e.text for e in runner.state.events] == ["fault: kill a"]


SLOW_START = """\
name: t
nodes: {a: {}, b: {}}
links:
  - {between: [a, b]}
reconverge_after: null
workloads:
  - {name: w, node: a, entry: 'apps.workloads:consumer'}
faults:
  - {at: 0s, cut: [a, b]}
duration: 600s
"""


class SlowStartAgent(LoopBoundAgent):
    """Its start of a process answers only when the test says (a loaded agent)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.release = threading.Event()

    def __call__(self, method: str, *args: Any, timeout: float) -> Any:
        if method == "spawn":
            self.release.wait(BLOCKED)
        return super().__call__(method, *args, timeout=timeout)


async def test_a_slow_workload_start_does_not_delay_the_faults_after_it(
    tmp_path: Path, mirrors: list[AgentMirror]
) -> None:
    """A loaded Ray agent once took seconds to start a workload; the timeline waited for it, so
    a cut planned for 2 s came at 4 s with its restore (planned for 3 s) right after it, and no
    packet met the cut (the every-fault test's drops read 0, issue 34)."""
    runner, agent = ray_runner(tmp_path, mirrors, SLOW_START, SlowStartAgent)
    assert isinstance(agent, SlowStartAgent)
    link = runner.sc.links[0]
    runner.fabric.link_faces[link.name] = {}  # (no forwarders here: the cut shapes no face)
    runner.state.t0 = time.time()
    timeline = asyncio.ensure_future(runner.timeline())
    try:
        async with asyncio.timeout(BLOCKED):  # only a failure waits this out
            while not runner.state.faults or runner.state.faults[0]["applied"] is None:
                if timeline.done():
                    await timeline
                await asyncio.sleep(0.01)
        assert agent.started == []  # the cut came while the workload was still starting
        assert runner.state.faults[0]["error"] is None
    finally:
        agent.release.set()
        timeline.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await timeline
