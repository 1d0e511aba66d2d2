"""Services co-located in their node's forwarder process, on an in-memory face."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import run_scenario

pytestmark = pytest.mark.slow

SCENARIO = """\
name: colocated
duration: 8s
nodes: {a: {}, b: {}}
links:
  - {between: [a, b], delay: 1ms}
reconverge_after: 200ms
services:
  - {name: producer, node: b, entry: "apps.workloads:producer", announce: [/co],
     args: {prefix: /co, size: 100}, colocate: true}
  - {name: failing, node: b, entry: "tests.integration.scenario.entries:failing",
     colocate: true}
workloads:
  - {name: consumer, node: a, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /co, rate: 100, lifetime: 300ms, retries: 1}}
faults:
  - {at: 2.5s, kill: b}
  - {at: 3s, restart: b}
report:
  interval: 500ms
"""


@pytest.mark.fault
def test_colocated_services_run_inside_the_forwarder(
    tmp_path: Path, state_dir: Path, cpu: CpuLoad
) -> None:
    # 8 s: the restart (a forwarder importing its services) took 0.4 s on a quiet machine and
    # 2.1 s while the other suite worker ran a saturated test; with 5 s the run ended before
    # the consumer could recover
    path = tmp_path / "co.yaml"
    path.write_text(SCENARIO)
    out = tmp_path / "out"
    proc, report = run_scenario(path, out, "--no-plots", timeout=cpu.budget(120))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = out / "logs"
    # no process of their own: they said they were ready on the forwarder's stdout, and the
    # forwarder gave them in-memory faces
    assert not list(logs.glob("producer*")) and not list(logs.glob("failing*"))
    for fwd in ("fwd-b", "fwd-b.1"):  # the restarted node brought its services back
        assert "icn-scenario: ready producer\n" in (logs / f"{fwd}.out").read_text()
        assert "memory://svc-producer" in (logs / f"{fwd}.err").read_text()
    wl = report["workloads"]["consumer"]
    # served before the kill and again after the restart (how many depends on how fast the node
    # restarts on a loaded machine: the recovery, not the count, is the point)
    assert wl["ok"] > 100 and wl["recovery"][0]["recovery_s"] is not None
    # served again soon after the node is back (its forwarder and co-located services up, the
    # routes recomputed 200 ms later): counted from the restart, not from the kill, since how
    # long the restart itself takes is the machine's load (0.4 s quiet, 2.6 s beside the other
    # suite worker's saturated test)
    kill, restart = report["faults"]
    back = kill["applied"] + wl["recovery"][0]["recovery_s"] - restart["applied"]
    assert back < cpu.budget(1.5), (back, report["faults"])
    # the failing service was reported, counted by its forwarder, which kept forwarding
    events = [e["text"] for e in report["meta"]["events"]]
    assert "service failing exited with code 1: RuntimeError: boom" in events, events
    assert not [e for e in events if "crashed" in e], events
    assert report["nodes"]["b"]["totals"]["scenario.service_error"] >= 1
    assert report["nodes"]["b"]["restarts"] == 1
    assert report["metrics"]["processes"]["failing"] == {"before_failing": 1.0}
    assert report["passed"]
