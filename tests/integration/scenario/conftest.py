"""Helpers for running whole scenarios through the CLI, as a user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.procs import icn_argv
from tests.chaos.harness import CpuLoad

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private run-record directory, so tests never see (or clean) other runs."""
    path = tmp_path / "state"
    monkeypatch.setenv("ICN_SCENARIO_STATE", str(path))
    yield path


def run_scenario(
    path: Path, out: Path, *extra: str, timeout: float = 120.0
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``icn scenario run PATH --out OUT``; returns the process and report.json."""
    proc = subprocess.run(
        icn_argv("scenario", "run", str(path), "--out", str(out), *extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )
    report_path = out / "report.json"
    assert report_path.exists(), f"no report:\n{proc.stdout}\n{proc.stderr}"
    return proc, json.loads(report_path.read_text())


_TIME_BOUND = re.compile(r"\b(max_p99_latency|max_recovery): *([0-9.]+)(ms|s)\b")
_RATE_BOUND = re.compile(r"\b(min_throughput): *([0-9.]+)\b")


def shipped(name: str, tmp_path: Path, cpu: CpuLoad) -> Path:
    """A copy of the shipped scenario ``name`` whose expectations' time bounds (p99 latency,
    recovery) are scaled by the CPU budget measured now, and its throughput floors divided by
    it: the files' figures are a quiet machine's, and the suite runs them beside its other
    workers (one call of the quickstart's caller took 796 ms against its 500 ms once; its
    consumer, paced at 200/s, which does not burst to catch up when late, made 149/s against
    its 150/s beside two busy loops)."""
    text = (SCENARIOS / name).read_text()

    def scale(m: re.Match[str]) -> str:
        return f"{m[1]}: {round(cpu.budget(float(m[2])), 3):g}{m[3]}"

    def floor(m: re.Match[str]) -> str:
        factor = cpu.budget(1.0)
        return f"{m[1]}: {round(float(m[2]) / factor, 1):g}"

    text = _TIME_BOUND.sub(scale, text)
    text = _RATE_BOUND.sub(floor, text)
    # a topology file named relative to the scenario's folder: named where it is
    text = re.sub(r"(?m)^topology: *(\S+)", lambda m: f"topology: {SCENARIOS / m[1]}", text)
    path = tmp_path / name
    path.write_text(text)
    return path


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
