"""scenarios/ddp.yaml, run by the launcher as a user would: four ranks of an unmodified DDP
script over backend icn, their gradients summed by aggregators in the forwarders, 1% loss on
one link."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.scenario.conftest import SCENARIOS, run_scenario
from tests.needs import has_module, needs

pytestmark = [
    pytest.mark.slow,
    needs(has_module("torch"), "scenarios/ddp.yaml needs torch: pip install -e .[torch]"),
]
WORKERS = ["w0", "w1", "w2", "w3"]


def test_ddp_trains_over_aggregators_in_the_network(tmp_path: Path, state_dir: Path) -> None:
    out = tmp_path / "out"
    proc, report = run_scenario(SCENARIOS / "ddp.yaml", out, "--no-plots", timeout=150)
    assert report["passed"], f"{report['expectations']}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # every rank trained to the end with the same parameters as every other (it checks)
    for w in WORKERS:
        assert report["workloads"][w]["ok"] == report["workloads"][w]["requests"] == 1
    figures = report["metrics"]["processes"]["w0"]
    losses = [figures[f"loss_epoch{e}"] for e in (1, 2, 3)]
    assert losses[0] > losses[1] > losses[2], losses
    assert figures["accuracy"] > 0.85
    assert "loss_epoch3" in proc.stdout and "accuracy" in proc.stdout  # shown to the user
    # the gradients went through the aggregators: each published sums, and the lossy link
    # carried them (its shaper is seeded: the same packets are dropped run after run)
    processes = report["metrics"]["processes"]
    assert all(processes[f"agg-{n}"]["bytes_sent"] > 0 for n in ("r", "a", "b"))
    assert sum(report["links"]["r-a"]["dropped"].values()) > 0
    # the ranks rendezvoused through a file of this run only, which torch removed
    assert not list((out / "ddp").glob("*.store"))
