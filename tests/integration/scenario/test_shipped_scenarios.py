"""Every scenario in scenarios/ runs on the local backend and its report shows what it claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import SCENARIOS, run_scenario

pytestmark = pytest.mark.slow


def _ok(proc: object, report: dict) -> None:
    assert report["passed"], f"{report['expectations']}\n{getattr(proc, 'stdout', '')}"
    assert getattr(proc, "returncode", None) == 0, getattr(proc, "stderr", "")
    assert all(e["passed"] for e in report["expectations"])
    assert "Traceback" not in getattr(proc, "stderr", "")


def test_quickstart(tmp_path: Path, state_dir: Path) -> None:
    proc, report = run_scenario(SCENARIOS / "quickstart.yaml", tmp_path / "out")
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
    text = (SCENARIOS / "quickstart.yaml").read_text()
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
        SCENARIOS / "failover.yaml", tmp_path / "out", "--no-plots", timeout=cpu.budget(120)
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
    before = [p for p in timeline if p["t"] < 3.5]
    after = [p for p in timeline if p["t"] > 6.0]
    key = "a>c_bytes_per_s"
    assert max(p[key] or 0 for p in before) < 2000 < min(p[key] or 0 for p in after[:3])


def test_rice(tmp_path: Path, state_dir: Path) -> None:
    proc, report = run_scenario(SCENARIOS / "rice.yaml", tmp_path / "out", "--no-plots")
    _ok(proc, report)
    workloads = report["workloads"]
    for name in ("quick", "pure"):
        assert workloads[name]["ok"] >= 0.99 * workloads[name]["requests"] > 0
    long = workloads["long"]
    assert long["ok"] == long["requests"] == 2
    # the 5 s job came back through its thunk: each call took about 5 s, not an Interest lifetime
    assert long["latency_ms"]["p50"] >= 5000
