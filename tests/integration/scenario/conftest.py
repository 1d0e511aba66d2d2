"""Helpers for running whole scenarios through the CLI, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.procs import icn_argv

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
