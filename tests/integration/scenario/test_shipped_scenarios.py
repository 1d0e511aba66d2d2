"""Every scenario in scenarios/ runs on the local backend and its report shows what it claims."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import SCENARIOS, run_scenario, shipped

pytestmark = pytest.mark.slow


def _ok(proc: object, report: dict) -> None:
    assert report["passed"], f"{report['expectations']}\n{getattr(proc, 'stdout', '')}"
    assert getattr(proc, "returncode", None) == 0, getattr(proc, "stderr", "")
    assert all(e["passed"] for e in report["expectations"])
    assert "Traceback" not in getattr(proc, "stderr", "")


def test_quickstart(tmp_path: Path, state_dir: Path, cpu: CpuLoad) -> None:
    path = shipped("quickstart.yaml", tmp_path, cpu)  # its p99 bounds scaled by the budget
    proc, report = run_scenario(path, tmp_path / "out")
    _ok(proc, report)
    wl = report["workloads"]["consumer"]
    assert wl["ok"] >= 0.99 * wl["requests"] > 0
    # every byte went a -> b -> c and back: both links carried the traffic
    for link in ("a-b", "b-c"):
        assert report["links"][link]["total_bytes"] > wl["ok"] * 1024
    for name in ("report.json", "throughput.png", "latency.png", "links.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert "PASSED" in proc.stdout
    caller = report["workloads"]["caller"]  # the named function, called through b
    assert caller["ok"] >= 0.99 * caller["requests"] > 0
    # nothing left: sockets gone, run record finished
    assert not list(state_dir.glob("*.json"))
    assert not Path(f"/tmp/icn-{report['meta']['run_id']}").exists()
    # the same --out again (a shorter run): a fresh report, not the first run's records plus
    # this one's
    short = tmp_path / "short.yaml"
    text = path.read_text()
    short.write_text(
        text.replace("duration: 8s", "duration: 4s").replace("duration: 6s", "duration: 2s")
    )
    _, again = run_scenario(short, tmp_path / "out", "--no-plots")
    assert 0 < again["workloads"]["consumer"]["requests"] < 0.6 * wl["requests"]


def test_loss_recovery(tmp_path: Path, state_dir: Path) -> None:
    proc, report = run_scenario(SCENARIOS / "loss-recovery.yaml", tmp_path / "out", "--no-plots")
    _ok(proc, report)
    wl = report["workloads"]["consumer"]
    assert wl["success_ratio"] >= 0.995
    # the loss was real: the shaper on b-c dropped packets in both directions
    dropped = report["links"]["b-c"]["dropped"]
    assert dropped["b>c"] > 0 and dropped["c>b"] > 0
    assert report["links"]["a-b"]["dropped"] == {"a>b": 0, "b>a": 0}


@pytest.mark.fault
def test_failover(tmp_path: Path, state_dir: Path, cpu: CpuLoad) -> None:
    proc, report = run_scenario(
        shipped("failover.yaml", tmp_path, cpu),
        tmp_path / "out",
        "--no-plots",
        timeout=cpu.budget(120),
    )
    _ok(proc, report)
    wl = report["workloads"]["consumer"]
    (rec,) = wl["recovery"]
    assert rec["fault"] == "kill b" and rec["recovery_s"] is not None
    assert rec["recovery_s"] <= cpu.budget(3.0)
    (fault,) = report["faults"]
    assert fault["applied"] == pytest.approx(4.0, abs=0.5)
    assert any("b down" in e["reason"] for e in report["route_events"])
    # before the kill the traffic took b; after it, c
    timeline = report["links"]["a-c"]["timeline"]
    key = "a>c_bytes_per_s"
    before = [p[key] or 0 for p in timeline if p["t"] < 3.5]
    after = [p[key] or 0 for p in timeline if p["t"] > 6.0]
    # The first three samples after 6 s: most of them carry the traffic (one may still hold the
    # end of the outage when recovery ran long under load: 1,072 B/s once, beside the suite's
    # saturated runs; at 200 requests/s a sample that carries it holds about 200 kB/s).  Each
    # rate is the average since the sample before, and under the saturated load a sample of
    # four nodes took seconds (at most one came after 6 s in one run), so "most" is of those
    # there are.
    assert after, f"no link sample after 6 s: {timeline}"
    first = after[:3]
    assert max(before, default=0) < 2000, before
    assert sum(rate > 2000 for rate in first) >= (len(first) + 1) // 2, first


def test_rice(tmp_path: Path, state_dir: Path, cpu: CpuLoad) -> None:
    proc, report = run_scenario(shipped("rice.yaml", tmp_path, cpu), tmp_path / "out", "--no-plots")
    _ok(proc, report)
    workloads = report["workloads"]
    for name in ("quick", "pure"):
        assert workloads[name]["ok"] >= 0.99 * workloads[name]["requests"] > 0
    long = workloads["long"]
    assert long["ok"] == long["requests"] == 2
    # the 5 s job came back through its thunk: each call took about 5 s, not an Interest lifetime
    assert long["latency_ms"]["p50"] >= 5000


def test_replicas(tmp_path: Path, state_dir: Path, cpu: CpuLoad) -> None:
    proc, report = run_scenario(
        SCENARIOS / "replicas.yaml", tmp_path / "out", timeout=cpu.budget(90)
    )
    _ok(proc, report)
    (fault,) = report["faults"]
    assert fault["text"] == "signal service r1" and fault["applied"] == pytest.approx(6, abs=1)
    (share,) = [e for e in report["expectations"] if e["criterion"] == "max_share"]
    assert share["actual"] <= 0.10
    calls = report["metrics"]["timelines"]["calls"]
    assert set(calls) == {"r1", "r2", "r3"}

    def part(replica: str, start: float, end: float) -> float:
        mine = sum(b["count"] for b in calls[replica] if start <= b["t"] < end)
        every = sum(b["count"] for rows in calls.values() for b in rows if start <= b["t"] < end)
        return mine / every

    # before its slowdown the nearest replica had most calls (0.95: the others get one probe
    # a second each, quiet or beside two busy loops); after it, others took them.  A suite run
    # once saw 0.0 here: r1's first answer (its session's full exchange, on a cold server) was
    # slow, and asf let each later probe move r1's estimate only an eighth of the way, while
    # its "no such session" answers to probes measured nothing real (issue 34; see
    # tests/unit/fw/test_asf.py, the replicas tests)
    assert part("r1", 3, 6) >= 0.8 and part("r1", 8, 13) <= 0.1
    assert report["workloads"]["caller"]["success_ratio"] == 1.0
    assert (tmp_path / "out" / "metrics.png").stat().st_size > 0


def test_straggler(tmp_path: Path, state_dir: Path, cpu: CpuLoad) -> None:
    proc, report = run_scenario(
        SCENARIOS / "straggler.yaml", tmp_path / "out", "--no-plots", timeout=cpu.budget(90)
    )
    _ok(proc, report)
    (ratio,) = [e for e in report["expectations"] if e["criterion"] == "max_p99_ratio"]
    assert ratio["actual"] <= 1 / 3
    ran = report["metrics"]["processes"]
    plain, cloned = report["workloads"]["plain"], report["workloads"]["cloned"]
    # the cost: without cloning every call ran once (probes take calls, never copy them);
    # with it, the clones and the probes' copies ran too (1 warm-up call each, unrecorded)
    assert ran["p1"]["calls"] + ran["p2"]["calls"] <= plain["requests"] + 1
    assert ran["c1"]["calls"] + ran["c2"]["calls"] > cloned["requests"] + 1
    assert ran["c1"]["cancelled_clone"] >= 1  # the straggler's cloned jobs were stopped
    assert report["nodes"]["a"]["totals"]["fw.clone"] >= 1


def test_research_net_from_its_graph_file(tmp_path: Path, state_dir: Path, cpu: CpuLoad) -> None:
    """40 forwarders read from a GraphML file, packed into two processes (the default above 16
    nodes), data across six hops with each link's delay from the file."""
    path = shipped("research-net.yaml", tmp_path, cpu)
    proc, report = run_scenario(path, tmp_path / "out", "--no-plots")
    _ok(proc, report)
    assert len(report["nodes"]) == 40
    assert "40 forwarders ready (local backend, 2 processes)" in proc.stdout
    wl = report["workloads"]["consumer"]
    assert wl["ok"] >= 0.99 * wl["requests"] > 0
    # the path the file's costs give: every hop of it carried the data, the backup links none
    path = ["lakeside_uni2", "lakeside", "southbay", "midland", "highmoor", "eastgate"]
    path.append("eastgate_hpc1")
    for a, b in pairwise(path):
        link = report["links"].get(f"{a}-{b}") or report["links"][f"{b}-{a}"]
        assert link["total_bytes"] > wl["ok"] * 1024, (a, b)
    # six hops of 1.4-2.9 ms each way: no answer can come back quicker than the file's delays
    assert wl["latency_ms"]["p50"] > 2 * 10.0


@pytest.mark.fault
def test_mapreduce(tmp_path: Path, state_dir: Path, cpu: CpuLoad) -> None:
    """Word counts on four executors, a worker node killed while they run: every job's counts
    exact.  (A shorter copy: three jobs of half the text, back to back, the kill meant to fall
    inside one of them.)"""
    text = shipped("mapreduce.yaml", tmp_path, cpu).read_text()
    text = (
        text.replace("{chunks: 64, scale: 75, jobs: 1}", "{chunks: 32, scale: 30, jobs: 3}")
        .replace("{at: 3.5s, kill: w2}", "{at: 1.8s, kill: w2}")
        .replace("duration: 15s", "duration: 9s")
        .replace("duration: 13s", "duration: 7s")
    )
    path = tmp_path / "mapreduce.yaml"
    path.write_text(text)
    proc, report = run_scenario(path, tmp_path / "out", "--no-plots", timeout=cpu.budget(90))
    _ok(proc, report)
    wl = report["workloads"]["wordcount"]
    assert wl["ok"] == wl["requests"] >= 2  # each job's counts checked exactly by the driver
    (fault,) = report["faults"]
    assert fault["text"] == "kill w2"
    # (whether the kill lands inside a job depends on how fast this machine starts the
    # workload; the re-execution itself is proven by event, not by time, in
    # tests/integration/tasks/test_task_faults.py)
