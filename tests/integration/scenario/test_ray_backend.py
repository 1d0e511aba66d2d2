"""The ray backend on a real Ray cluster of three Ray nodes, each in a network namespace of this
test's own (tests/integration/scenario/ray_cluster.py): the shipped quickstart and failover
scenarios pass on it with the expectations they meet on ``local``, every kind of fault works, a
placement label no Ray node has is refused before anything starts, placements are followed, and
a launcher stopped by SIGTERM or killed outright leaves no process on the cluster.

One cluster for the module (it takes 5-10 s to start), and the module's tests on one xdist
worker.  It needs root and iproute2: under CI (``CI`` set, root there) their absence fails the
module, elsewhere it is skipped with the reason.  The launcher runs in the head's namespace, as
it would on a cluster's head; every process, namespace and temporary file is removed after the
module, also when it fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.procs import icn_argv
from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import SCENARIOS, pid_alive, shipped
from tests.integration.scenario.ray_cluster import RayCluster
from tests.needs import has_module, is_root_with, needs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("ray"),
    # the cluster's nodes are network namespaces (tests/needs.py: skipped by hand, failed in CI)
    needs(is_root_with("ip"), "the Ray cluster tests make network namespaces: need root and ip"),
]

RUN_TIMEOUT = 180.0


def _check_machine() -> None:
    """Ray is a hard dependency of the suite (scripts/bootstrap.sh installs the .[ray] extra):
    its absence fails, here as everywhere."""
    if not has_module("ray"):
        pytest.fail("ray is not installed: scripts/bootstrap.sh installs the .[ray] extra")


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    _check_machine()
    made = RayCluster()
    try:
        made.start(3)
        yield made
    finally:
        left = made.teardown()
        assert not left, f"the Ray cluster left {left}"


def launcher_argv(cluster: RayCluster, path: Path, out: Path, *extra: str) -> list[str]:
    args = ["scenario", "run", str(path), "--backend", "ray", "--ray-address", cluster.address]
    return cluster.exec_argv(cluster.head, icn_argv(*args, "--out", str(out), *extra))


def launcher_env(cluster: RayCluster) -> dict[str, str]:
    return {**cluster.env(), "COLUMNS": "200"}


def run_on_ray(
    cluster: RayCluster, path: Path, out: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``icn scenario run PATH --backend ray`` in the head's namespace; the report if any."""
    proc = subprocess.run(
        launcher_argv(cluster, path, out, *extra),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=launcher_env(cluster),
        stdin=subprocess.DEVNULL,
    )
    report = out / "report.json"
    return proc, json.loads(report.read_text()) if report.exists() else None


def passed(proc: subprocess.CompletedProcess[str], report: dict[str, Any] | None) -> dict[str, Any]:
    """The report of a run in which every expectation of the file held (as on local)."""
    assert report is not None, f"no report:\n{proc.stdout}\n{proc.stderr}"
    assert report["passed"], f"{report['expectations']}\n{proc.stdout}"
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(e["passed"] for e in report["expectations"])
    assert "Traceback" not in proc.stdout + proc.stderr
    assert report["meta"]["backend"] == "ray"
    return report


def processes_of(run_id: str) -> list[int]:
    """PIDs of processes whose command line names one of the run's agent folders (the
    forwarders, services and workloads the agents started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"icn-ray-{run_id}-".encode() in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def nothing_left_of(cluster: RayCluster, run_id: str) -> None:
    assert not (cluster.tmp_dir / f"icn-{run_id}").exists()  # the launcher's relay sockets
    assert not list(cluster.tmp_dir.glob(f"icn-ray-{run_id}-*"))  # the agents' folders
    assert processes_of(run_id) == []


def nothing_left(cluster: RayCluster, run_id: str, state_dir: Path) -> None:
    assert not list(state_dir.glob("*.json"))  # the run record finished
    nothing_left_of(cluster, run_id)


def test_quickstart_on_ray(
    cluster: RayCluster, tmp_path: Path, state_dir: Path, cpu: CpuLoad
) -> None:
    out = tmp_path / "out"
    # the file's p99 bounds scaled by the CPU budget (a Ray quickstart once missed its 500 ms),
    # with a trust block: the run's identities reach the processes on their Ray nodes
    path = shipped("quickstart.yaml", tmp_path, cpu)
    path.write_text(path.read_text() + "trust: {}\n")
    proc, report = run_on_ray(cluster, path, out)
    report = passed(proc, report)
    assert len(report["expectations"]) == 5  # the file's, all of them held
    assert "PASSED" in proc.stdout
    wl = report["workloads"]["consumer"]
    assert wl["ok"] >= 0.99 * wl["requests"] > 0
    for link in ("a-b", "b-c"):  # the data crossed both links, so two Ray nodes each
        assert report["links"][link]["total_bytes"] > wl["ok"] * 1024
    caller = report["workloads"]["caller"]
    assert caller["ok"] >= 0.99 * caller["requests"] > 0
    # every Data the consumer took was validated (the producer's certificate fetched from c)
    took = report["metrics"]["processes"]["consumer"]
    assert took["data_validated"] == wl["ok"] and took["data_refused"] == 0
    # spread: three nodes, three Ray nodes, 6363 on each
    placement = json.loads((out / "placement.json").read_text())
    assert sorted(p["address"] for p in placement.values()) == [n.address for n in cluster.nodes]
    assert {p["port"] for p in placement.values()} == {6363}
    # logs and results came back to the launcher's output folder
    addr = placement["a"]["address"]
    assert f"listening on udp4://{addr}:6363" in (out / "logs" / "fwd-a.err").read_text()
    assert (out / "logs" / "producer.out").read_text().startswith("icn-scenario: ready")
    assert (out / "results" / "consumer.jsonl").stat().st_size > 0
    for name in ("report.json", "throughput.png", "latency.png", "links.png"):
        assert (out / name).stat().st_size > 0
    nothing_left(cluster, report["meta"]["run_id"], state_dir)


def test_failover_on_ray(
    cluster: RayCluster, tmp_path: Path, state_dir: Path, cpu: CpuLoad
) -> None:
    cpu.budget(3.0)  # the load at the start is kept: the bound below counts the larger scale
    path = shipped("failover.yaml", tmp_path, cpu)  # its recovery bound scaled
    proc, report = run_on_ray(cluster, path, tmp_path / "out", "--no-plots")
    report = passed(proc, report)
    assert [e["criterion"] for e in report["expectations"]] == [
        "min_success_ratio",
        "max_recovery",
    ]
    (rec,) = report["workloads"]["consumer"]["recovery"]
    assert rec["fault"] == "kill b" and rec["recovery_s"] is not None
    assert rec["recovery_s"] <= cpu.budget(3.0)
    (fault,) = report["faults"]
    assert fault["applied"] == pytest.approx(4.0, abs=0.5)
    assert any("b down" in e["reason"] for e in report["route_events"])
    # before the kill the traffic took b; after it, c
    timeline = report["links"]["a-c"]["timeline"]
    before = [p for p in timeline if p["t"] < 3.5]
    after = [p for p in timeline if p["t"] > 6.0]
    key = "a>c_bytes_per_s"
    assert max(p[key] or 0 for p in before) < 2000 < min(p[key] or 0 for p in after[:3])
    # four nodes on three Ray nodes: the two that share one listen on two ports
    placement = json.loads((tmp_path / "out" / "placement.json").read_text())
    by_address: dict[str, list[int]] = {}
    for p in placement.values():
        by_address.setdefault(p["address"], []).append(p["port"])
    assert sorted(sorted(ports) for ports in by_address.values()) == [
        [6363],
        [6363],
        [6363, 6364],
    ]
    nothing_left(cluster, report["meta"]["run_id"], state_dir)


def test_a_placement_label_no_ray_node_has_is_refused_before_anything_starts(
    cluster: RayCluster, tmp_path: Path, state_dir: Path
) -> None:
    path = tmp_path / "mars.yaml"
    text = (SCENARIOS / "quickstart.yaml").read_text()
    path.write_text(text + "placement:\n  a: {label: zone=z1}\n  c: {label: zone=mars}\n")
    out = tmp_path / "out"
    proc, report = run_on_ray(cluster, path, out)
    assert proc.returncode == 1 and report is None, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())  # rich wraps long lines
    assert (
        "placement.c: no Ray node has the label zone=mars; the labels are zone=z0, zone=z1, "
        "zone=z2 (and ray.io/node-id=<id> on each node)"
    ) in said
    assert "Traceback" not in proc.stdout + proc.stderr
    # nothing started: no agent, no forwarder, no log
    run_id = proc.stdout.split(": run ", 1)[1][:6]
    assert not (out / "placement.json").exists() and not (out / "logs").exists()
    assert not list(cluster.tmp_dir.glob(f"icn-ray-{run_id}-*"))
    assert not list(state_dir.glob("*.json"))


EVERY_FAULT = """\
name: every-fault
duration: %ss
nodes: {a: {}, b: {}, c: {}}
links:
  - {between: [a, b], delay: 1ms}
  - {between: [b, c], delay: 1ms, transport: tcp}
reconverge_after: 500ms
services:
  - {name: producer, node: c, entry: "apps.workloads:producer", announce: [/f],
     args: {prefix: /f}}
  - {name: side, node: b, entry: "apps.workloads:producer", announce: [/side],
     args: {prefix: /side}}
workloads:
  - {name: consumer, node: a, entry: "apps.workloads:consumer", start: 500ms,
     args: {prefix: /f, rate: 100, lifetime: 300ms, retries: 1}}
  - {name: probe, node: a, entry: "apps.workloads:consumer", start: 500ms,
     args: {prefix: /side, rate: 10}}
faults:
  - {at: 2s, cut: [a, b]}
  - {at: 3s, restore: a-b}
  - {at: 4s, kill: producer}
  - {at: 4.5s, kill: probe}
  - {at: 5s, restart: producer}
  - {at: 5.5s, restart: probe}
  - {at: 6.5s, kill: b}
  - {at: 7s, restart: b}
  - {at: 8.5s, shape: [a, b], delay: 50ms}
report:
  interval: 500ms
"""


ONE_NODE = """\
name: one-node
duration: 60s
nodes: {a: {}}
services:
  - {name: producer, node: a, entry: apps.workloads:producer, announce: [/p],
     args: {prefix: /p}}
workloads:
  - {name: consumer, node: a, entry: apps.workloads:consumer, start: 0s,
     args: {prefix: /p, rate: 20}}
placement:
  a: {label: zone=%s}
"""


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        time.sleep(0.2)


class Launcher:
    """A launcher running ``text`` in the background, its output in ``folder``."""

    def __init__(self, cluster: RayCluster, folder: Path, text: str) -> None:
        folder.mkdir()
        self.folder = folder
        self.out = folder / "out"
        self.log = folder / "launcher.log"
        path = folder / "scenario.yaml"
        path.write_text(text)
        with open(self.log, "wb") as sink:
            self.proc = subprocess.Popen(
                launcher_argv(cluster, path, self.out, "--no-plots"),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=launcher_env(cluster),
            )

    def running(self) -> bool:
        """Its workload started (so its forwarders and service run too)."""
        if self.proc.poll() is not None:
            raise AssertionError(f"the launcher ended early:\n{self.log.read_text()}")
        return "workload consumer started" in self.log.read_text()

    def placement(self) -> dict[str, Any]:
        return json.loads((self.out / "placement.json").read_text())  # type: ignore[no-any-return]

    def run_id(self) -> str:
        return self.log.read_text().split(": run ", 1)[1][:6]

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def niceness(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


def test_every_fault_kind_beside_two_runs_that_are_stopped_and_killed(
    cluster: RayCluster, tmp_path: Path, state_dir: Path, cpu: CpuLoad
) -> None:
    """Three runs on the cluster at once.  One cuts, restores and shapes a link and kills and
    restarts a service, a workload and a node (its TCP link to c made again), and it goes as on
    local (tests/integration/scenario/test_faults.py and test_process_faults.py).  Beside it,
    on the same Ray nodes (each forwarder on a port of its own), two runs that then end without
    finishing: one by SIGTERM, which stops the run and everything it started, its logs pulled
    to the end; one killed outright, with no teardown, so Ray ends its agents, which take their
    children, and ``icn scenario clean`` removes what it left on the launcher's machine.  Both
    follow their placement, and what they start runs at its Ray node's niceness (not 15 nicer,
    as Ray makes its workers)."""
    cpu.budget(5.0)  # the load at the start is kept: the bounds below count the larger scale
    # placed away from where spreading would put them (the first Ray node)
    stopped = Launcher(cluster, tmp_path / "stopped", ONE_NODE % "z1")
    killed = Launcher(cluster, tmp_path / "killed", ONE_NODE % "z2")
    try:
        path = tmp_path / "faults.yaml"
        # the shape is planned at 8.5 s, after b's restart, and faults go in order; 3 s of
        # shaped requests after it on a quiet machine, as much more as the CPU is slower (beside
        # two busy loops b's restart once pushed the shape so late that no shaped bin was left)
        path.write_text(EVERY_FAULT % round(8.5 + cpu.budget(3.0), 1))
        out = tmp_path / "out"
        proc, report = run_on_ray(cluster, path, out, "--no-plots")
        wait_for(lambda: stopped.running() and killed.running(), 60, "both other runs running")
        ports = [
            (p["address"], p["port"])
            for placement in (json.loads((out / "placement.json").read_text()),
                              stopped.placement(), killed.placement())
            for p in placement.values()
        ]  # fmt: skip
        assert len(set(ports)) == len(ports) == 5, ports
        assert stopped.placement()["a"]["address"] == cluster.nodes[1].address
        placement = killed.placement()
        assert placement["a"]["address"] == cluster.nodes[2].address
        started = processes_of(killed.run_id())
        agents = [p["agent_pid"] for p in placement.values()]
        assert len(started) >= 3 and all(pid_alive(p) for p in agents)  # fwd, producer, consumer
        raylet = niceness(cluster.nodes[2].raylet_pid())  # this test's, which started it
        for pid in [*started, *agents, *processes_of(stopped.run_id())]:
            assert niceness(pid) == raylet, (pid, niceness(pid))

        killed.proc.send_signal(signal.SIGKILL)  # no teardown: Ray and the agents must do it
        stopped.proc.send_signal(signal.SIGTERM)  # Ray's own SIGTERM handler must not take over
        assert stopped.proc.wait(60) == 130, stopped.log.read_text()
        killed.proc.wait(10)
        wait_for(lambda: not any(pid_alive(p) for p in agents), 60, "the agents ended")
        wait_for(lambda: not any(pid_alive(p) for p in started), 10, "their children ended")
    finally:
        stopped.end()
        killed.end()

    report = passed(proc, report)
    faults = report["faults"]
    assert all(f["error"] is None and f["applied"] is not None for f in faults), faults
    assert [f["text"] for f in faults] == [
        "cut a-b",
        "restore a-b",
        "kill service producer",
        "kill workload probe",
        "restart service producer",
        "restart workload probe",
        "kill b",
        "restart b",
        "shape a-b",
    ]
    wl = report["workloads"]["consumer"]
    recovery = {r["fault"]: r["recovery_s"] for r in wl["recovery"]}
    assert set(recovery) == {"cut a-b", "kill service producer", "kill b"}, recovery
    bound = cpu.budget(5.0)
    assert all(v is not None and v < bound for v in recovery.values()), (recovery, bound)
    # the cut, in a's face on its Ray node.  Drops count from a's first sample on; with the cut
    # at 1.5 s, 0 were counted in 2 of 4 suite runs, so every fault comes 0.5 s later than it did
    cut_at = faults[0]["applied"]
    why = {  # what tells a cut that was not applied from one no request crossed (seen once)
        "link": {k: v for k, v in report["links"]["a-b"].items() if k != "timeline"},
        "link_timeline": report["links"]["a-b"]["timeline"][:12],
        "consumer": [b for b in wl["timeline"] if cut_at - 1.0 <= b["t"] <= cut_at + 1.5],
        "a_totals": {
            k: v for k, v in (report["nodes"]["a"].get("totals") or {}).items() if "shaper" in k
        },
    }
    assert report["links"]["a-b"]["dropped"]["a>b"] > 0, json.dumps(why)
    assert report["nodes"]["b"]["restarts"] >= 1
    # 50 ms each way on a-b once the shape is applied: planned at 8.5 s, after the restart of b,
    # which takes 1-3 s under load (b's forwarder, links and service), and faults go in order:
    # the run lasts 3 s (scaled) past 8.5 s so that shaped requests complete in the last bins
    shaped_at = faults[-1]["applied"]
    late = [b for b in wl["timeline"] if b["t"] >= shaped_at + 0.5 and b["p50_ms"] is not None]
    # every answered bin before the shape, not only the first ones: under the suite's load the
    # consumer once started at 2.5 s instead of 0.5 s (starting a process through Ray blocked
    # the launcher's loop then; it no longer does, but a busy agent still answers late), so no
    # bin before the cut had an answer
    early = [b for b in wl["timeline"] if b["t"] <= shaped_at - 1.0 and b["p50_ms"] is not None]
    assert late and early, wl["timeline"]
    assert min(b["p50_ms"] for b in late) > 90 > max(b["p50_ms"] for b in early)
    events = [e["text"] for e in report["meta"]["events"]]
    for text in ("fault: restart b", "routes updated (b back)", "workload probe restarted on a"):
        assert any(text in e for e in events), events
    assert not [e for e in events if "exited with code" in e or "crashed" in e], events
    for name in ("producer.1.out", "probe.1.out", "fwd-b.1.err", "side.1.out"):
        assert (out / "logs" / name).exists(), name  # restarts' logs, pulled back
    nothing_left_of(cluster, report["meta"]["run_id"])

    assert "interrupted" in stopped.log.read_text()
    assert "forwarder stopped" in (stopped.out / "logs" / "fwd-a.err").read_text()  # to the end
    nothing_left_of(cluster, stopped.run_id())
    # what the killed launcher left on its own machine: `clean` removes it, as after a local run
    done = subprocess.run(
        icn_argv("scenario", "clean"),
        capture_output=True,
        text=True,
        timeout=60,
        env=cluster.env(),
    )
    assert done.returncode == 0, done.stderr
    assert f"removed {cluster.tmp_dir / f'icn-{killed.run_id()}'}" in done.stdout
    assert not list(state_dir.glob("*.json"))  # every run record finished or cleaned
    assert processes_of(killed.run_id()) == []  # its agents' folders: the next agents sweep them
