"""The harness itself: busy processes start, really load the CPU and are reaped; the time scale
sees the load; a fault test runs once quiet and once saturated."""

from __future__ import annotations

import os
import time

import pytest

from tests.chaos.contention import (
    MAX_SCALE,
    Contention,
    baseline,
    cpu_seconds,
    measure,
    saturating_processes,
    time_scale,
)
from tests.chaos.harness import CpuLoad


def test_busy_processes_load_the_cores_other_workers_leave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cores = os.cpu_count() or 1
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert saturating_processes() == cores  # a run of its own: every core
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(cores + 2))
    assert saturating_processes() == 1  # more workers than cores: one, never none
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert saturating_processes() == cores


def test_busy_processes_spin_and_are_reaped() -> None:
    with Contention() as contention:
        pids = contention.pids
        assert len(pids) == saturating_processes()
        before = {pid: cpu_seconds(pid) for pid in pids}
        started = time.monotonic()
        # a whole core each on an idle machine; on a shared one (another suite, a compiler)
        # they get less, so wait, bounded, for each to have spun half a second: a process that
        # does not spin (sleeps, blocks, exited) never gets there
        deadline = started + 10.0
        while True:
            used = [cpu_seconds(pid) - before[pid] for pid in pids]
            if min(used) >= 0.5 or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # polling the processes' CPU time
        wall = time.monotonic() - started
    assert min(used) >= 0.5, f"busy processes used {used} s of CPU in {wall:.2f} s"
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}"), f"busy process {pid} was not reaped"


def test_busy_processes_are_stopped_when_the_body_raises() -> None:
    contention = Contention(processes=1)
    with pytest.raises(RuntimeError), contention:
        pid = contention.pids[0]
        raise RuntimeError("the test failed")
    assert not os.path.exists(f"/proc/{pid}")


def test_a_busy_process_ends_by_itself_after_its_life() -> None:
    contention = Contention(processes=1, max_life=0.3)
    contention.start()
    try:
        contention.children[0].wait(10)  # bounded: it should end within about 0.4 s
        assert contention.children[0].returncode == 0
    finally:
        contention.stop()


def test_a_baseline_taken_on_a_busy_start_comes_down_to_the_quiet_time() -> None:
    import tests.chaos.contention as contention

    true = baseline()
    saved = contention._baseline
    contention._baseline = 10 * true  # as if measured while the workers started together
    try:
        measure(rounds=15)  # quieter now than ten times the quiet time, whatever runs beside
        assert baseline() < 10 * true  # (below it even beside a saturated fault test)
    finally:
        contention._baseline = min(saved or true, contention._baseline or true)


def test_time_scale_grows_with_contention() -> None:
    # against the session's quiet baseline, not a measurement now: under pytest-xdist the
    # other worker's tests may be loading the machine at this moment
    quiet = baseline()
    # two busy processes per core: the calibration gets at most a third of a core
    with Contention(processes=2 * (os.cpu_count() or 1)):
        # 41 rounds, about 0.1 s quiet: a process that has just slept (waiting for the busy
        # ones to spin) is owed CPU by the scheduler and ran 7 rounds of 3 ms at full speed
        # (0.0031 s loaded against 0.0029 quiet in a suite run)
        loaded = measure(rounds=41)
        scale = time_scale()
    assert loaded > 1.3 * quiet, f"calibration took {loaded:.4f} s loaded, {quiet:.4f} s quiet"
    assert 1.0 < scale <= MAX_SCALE


@pytest.mark.fault
def test_a_fault_test_runs_quiet_and_saturated(
    cpu: CpuLoad, request: pytest.FixtureRequest
) -> None:
    assert cpu.kind == request.node.callspec.params["cpu"]
    at_start = cpu.scale
    assert cpu.budget(10) == 10 * cpu.scale  # measured again: never below the start's
    assert 1.0 <= at_start <= cpu.scale <= MAX_SCALE
    if cpu.kind == "saturated":
        assert len(cpu.pids) == saturating_processes()
        assert all(os.path.exists(f"/proc/{pid}") for pid in cpu.pids)
    else:
        assert cpu.pids == []
