"""The chaos-soak scenario, shortened to 20 s, through the launcher as a user runs it: the seeded
chaos faults are applied, and the invariants (stream windows exactly once, allreduce rounds
bit-exact or a named error, calls answered or a typed error) hold and are reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.scenario.conftest import SCENARIOS, run_scenario

pytestmark = pytest.mark.slow

INVARIANTS = ("exactly_once_per_window", "bit_exact_or_named_error", "answered_or_typed_error")


def shortened(
    out: Path, duration: int, seed: int, chaos: dict[str, Any] | None = None
) -> tuple[Path, int]:
    """scenarios/chaos-soak.yaml for ``duration`` seconds: the stream's input over by about
    half of it, workers' rounds and the chaos span scaled to fit; returns the file and the
    number of windows the stream makes."""
    sc = yaml.safe_load((SCENARIOS / "chaos-soak.yaml").read_text())
    sc["duration"] = f"{duration}s"
    input_s = duration // 2
    for svc in sc["services"]:
        for op in (svc["args"].get("graph") or {}).get("operators", []):
            if op["type"] == "generator":
                op["count"] = op["rate"] * input_s
    for wl in sc["workloads"]:
        if "rounds" in wl["args"]:
            wl["args"]["rounds"] = max(3, (duration - 8) // 2)
    sc["chaos"].update(
        {
            "seed": seed,
            "start": "3s",
            "end": f"{duration - 5}s",
            "interval": ["2s", "4s"],
            "down_for": ["1s", "3s"],
            "loss_for": ["2s", "4s"],
            **(chaos or {}),
        }
    )
    windows = input_s * 8  # 1 s windows of 8 keys
    sc["report"]["invariants"] = [
        {"check": "exactly_once_per_window", "process": "stream-check", "min_checks": windows},
        {"check": "bit_exact_or_named_error", "min_checks": 3},
        {"check": "answered_or_typed_error", "min_checks": 5 * (duration - 10)},
    ]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "soak.yaml"
    path.write_text(yaml.safe_dump(sc, sort_keys=False))
    return path, windows


def test_a_short_chaos_soak_holds_every_invariant(tmp_path: Path, state_dir: Path) -> None:
    path, windows = shortened(tmp_path, 20, seed=64, chaos={"interval": ["2s", "3s"]})
    proc, report = run_scenario(path, tmp_path / "out", "--no-plots", timeout=150)
    rows = report["invariants"]
    assert report["passed"], f"{rows}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert {r["check"] for r in rows} == set(INVARIANTS)
    by = {(r["check"], r["process"]): r for r in rows}
    stream = by["exactly_once_per_window", "stream-check"]
    assert stream["checks"] == stream["held"] == windows and stream["violated"] == 0
    assert {p for c, p in by if c == "bit_exact_or_named_error"} == {"w0", "w1", "w2", "w3"}
    assert {p for c, p in by if c == "answered_or_typed_error"} == {"calls-a", "calls-d"}
    # the chaos plan was printed and played: each of its faults applied, counted per kind
    assert "chaos (seed 64): 4 episodes" in proc.stdout
    planned = sum(c["planned"] for c in report["fault_counts"])
    assert planned == len(report["faults"]) >= 4
    assert all(c["failed"] == 0 for c in report["fault_counts"]), report["faults"]
    for table in ("faults injected", "invariants"):
        assert table in proc.stdout
