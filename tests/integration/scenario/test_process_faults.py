"""Faults that kill and restart one service or workload while its node's forwarder stays up."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import run_scenario

pytestmark = pytest.mark.slow

SCENARIO = """\
name: process-faults
duration: %ss
nodes: {a: {}, b: {}}
links:
  - {between: [a, b], delay: 1ms}
reconverge_after: 200ms
services:
  - {name: producer, node: b, entry: "tests.integration.scenario.entries:counting_producer",
     announce: [/pf], args: {prefix: /pf}}
workloads:
  - {name: consumer, node: a, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /pf, rate: 100, lifetime: 300ms, retries: 1}}
  - {name: probe, node: a, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /pf, rate: 10}}
faults:
  - {at: 1.5s, kill: producer}
  - {at: 2.5s, restart: producer}
  - {at: 2s, kill: probe}
  - {at: 3s, restart: probe}
report:
  interval: 500ms
  expect:
    - {metric: served, min: 1}
    - {metric: served, process: producer, min: 1}
"""


@pytest.mark.fault
def test_kill_and_restart_a_service_and_a_workload(
    tmp_path: Path, state_dir: Path, cpu: CpuLoad
) -> None:
    path = tmp_path / "pf.yaml"
    # 5 s on a quiet machine, longer as the CPU is slower: the faults go in order, and the
    # producer's restart waits for it to be ready (2.8 s once, saturated beside the suite's
    # other workers), so the probe's restart at 3 s came after its span had ended at 5 s
    path.write_text(SCENARIO % round(cpu.budget(5.0), 1))
    out = tmp_path / "out"
    proc, report = run_scenario(path, out, "--no-plots", timeout=cpu.budget(120))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    faults = report["faults"]
    assert all(f["error"] is None and f["applied"] is not None for f in faults), faults
    assert [f["text"] for f in faults] == [
        "kill service producer",
        "kill workload probe",
        "restart service producer",
        "restart workload probe",
    ]
    events = [e["text"] for e in report["meta"]["events"]]
    for text in (
        "fault: kill service producer",
        "fault: restart service producer",
        "fault: kill workload probe",
        "workload probe restarted on a",
    ):
        assert text in events, events
    # a fault's kill is not a crash; the forwarder of b never went down
    assert not [e for e in events if "exited with code" in e or "crashed" in e], events
    assert report["nodes"]["b"]["restarts"] == 0 and report["nodes"]["b"]["down_samples"] == 0
    assert (out / "logs" / "producer.1.out").exists() and (out / "logs" / "probe.1.out").exists()
    assert not (out / "logs" / "fwd-b.1.err").exists()
    # requests failed while the producer was dead, and came back after the restart
    consumer = report["workloads"]["consumer"]
    assert consumer["failed"] > 0
    # measured after the producer's kill, not after the probe's (no one else's requests)
    (recovery,) = consumer["recovery"]
    assert recovery["fault"] == "kill service producer"
    assert recovery["recovery_s"] is not None and recovery["recovery_s"] < cpu.budget(2.5)
    assert "routes updated (service producer back): 1 changes" in events
    # the restarted producer's metric (its own count, from 0) reached the report
    assert report["metrics"]["processes"]["producer"]["served"] > 0
    assert report["passed"] and len(report["expectations"]) == 2
    assert "metrics (last values)" in proc.stdout
