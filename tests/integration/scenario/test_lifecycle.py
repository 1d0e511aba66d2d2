"""No process, socket or namespace outlives a run: interrupted, killed outright, or on netns."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from apps.procs import icn_argv
from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import SCENARIOS, pid_alive, run_scenario, shipped
from tests.needs import is_root_with, needs

pytestmark = pytest.mark.slow


def _launch(out: Path, log: Path, scenario: str = "failover.yaml") -> subprocess.Popen[bytes]:
    with open(log, "wb") as f:
        return subprocess.Popen(
            icn_argv("scenario", "run", str(SCENARIOS / scenario), "--out", str(out)),
            stdout=f,
            stderr=subprocess.STDOUT,
        )


def _wait_running(
    proc: subprocess.Popen[bytes], log: Path, state: Path, timeout: float = 30
) -> dict[str, Any]:
    """Wait until the workload runs; return the run record (every PID the run started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        records = list(state.glob("*.json"))
        if records and "workload consumer started" in log.read_text():
            return json.loads(records[0].read_text())  # type: ignore[no-any-return]
        time.sleep(0.1)  # polling the log and the state dir
    raise AssertionError(f"the run did not start its workload in {timeout:g} s:\n{log.read_text()}")


def _pids(record: dict[str, Any]) -> list[int]:
    return [int(p["pid"] if isinstance(p, dict) else p) for p in record["pids"]]


def _wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in pids if pid_alive(p)]
        time.sleep(0.05)  # polling the PIDs
    return alive


def test_ctrl_c_stops_everything(tmp_path: Path, state_dir: Path) -> None:
    log = tmp_path / "launcher.log"
    proc = _launch(tmp_path / "out", log)
    try:
        record = _wait_running(proc, log, state_dir)
        pids = _pids(record)
        assert len(pids) >= 6  # 4 forwarders, the producer, the consumer
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "interrupted" in log.read_text()
    assert not [p for p in pids if pid_alive(p)], "a child outlived the interrupted run"
    assert not Path(f"/tmp/icn-{record['run_id']}").exists(), "sockets left behind"
    assert not list(state_dir.glob("*.json")), "the run record was not closed"


@pytest.mark.fault
def test_killed_launcher_takes_its_children_and_clean_removes_the_rest(
    tmp_path: Path, state_dir: Path, cpu: CpuLoad
) -> None:
    log = tmp_path / "launcher.log"
    proc = _launch(tmp_path / "out", log)
    try:
        record = _wait_running(proc, log, state_dir, cpu.budget(30))
        proc.kill()  # no chance to clean up
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert not _wait_dead(_pids(record), cpu.budget(10)), "children outlived a killed launcher"
    sock_dir = Path(f"/tmp/icn-{record['run_id']}")
    assert sock_dir.exists() and list(state_dir.glob("*.json"))  # what a crash leaves
    out = subprocess.run(
        icn_argv("scenario", "clean"), capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert record["run_id"] in out
    assert not sock_dir.exists() and not list(state_dir.glob("*.json"))
    again = subprocess.run(
        icn_argv("scenario", "clean"), capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "nothing to clean" in again


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


@needs(is_root_with("ip"), "the netns backend needs root and iproute2 (CI has both)")
def test_quickstart_on_netns_leaves_no_namespace(
    tmp_path: Path, state_dir: Path, cpu: CpuLoad
) -> None:
    path = shipped("quickstart.yaml", tmp_path, cpu)  # its p99 bounds scaled (one was 882 ms)
    path.write_text(path.read_text() + "trust: {}\n")  # identities reach every namespace
    proc, report = run_scenario(path, tmp_path / "out", "--backend", "netns", "--no-plots")
    assert proc.returncode == 0 and report["passed"], proc.stdout + proc.stderr
    assert report["meta"]["backend"] == "netns"
    wl = report["workloads"]["consumer"]
    assert wl["ok"] > 0 and wl["success_ratio"] >= 0.99
    # every Data validated: the producer's certificate fetched from c's namespace through b
    took = report["metrics"]["processes"]["consumer"]
    assert took["data_validated"] == wl["ok"] and took["data_refused"] == 0
    # the forwarders really were in their namespaces: configs listen on 0.0.0.0 there, and the
    # link faces point at the veth addresses
    assert all(report["links"][ln]["total_bytes"] > 0 for ln in ("a-b", "b-c"))
    run_id = report["meta"]["run_id"]
    # every namespace of a run is named icn-<run id>-...: none of this run's is left (others
    # may exist meanwhile: netns tests on other workers make their own)
    assert not [ns for ns in _namespaces() if ns.startswith(f"icn-{run_id}-")]
