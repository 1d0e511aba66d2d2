"""`icn scenario` refusing bad files and reporting failed parts, with nothing left running."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.icn_runs import run_icn
from tests.integration.scenario.conftest import SCENARIOS

BROKEN_SERVICE = """\
name: broken
duration: 5s
nodes: {a: {}}
services:
  - {name: crasher, node: a, entry: "json:loads", ready_timeout: 5s}
"""

CRASHING_WORKLOAD = """\
name: crashing
duration: 3s
nodes: {a: {}}
workloads:
  - {name: bad, node: a, entry: "json:loads", start: 0s}
"""


def icn(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``icn ARGS``: the first call of a command in a test as a process, the later ones in this
    process (tests/integration/icn_runs.py)."""
    ran = run_icn(args, {"COLUMNS": "200"}, timeout=timeout)
    return subprocess.CompletedProcess(
        list(args), ran.returncode, ran.stdout.decode(), ran.stderr.decode()
    )


def test_validate_ok_and_invalid(tmp_path: Path) -> None:
    ok = icn("scenario", "validate", str(SCENARIOS / "failover.yaml"))
    assert ok.returncode == 0 and "OK: 4 nodes, 4 links" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nnodes: {a: {}}\nlinks:\n  - {between: [a, z], delay: 3 days}\n")
    out = icn("scenario", "validate", str(bad))
    assert out.returncode == 2
    assert f"{bad}:4:23: links[0].delay: '3 days': unknown time unit 'days'" in out.stderr
    assert "Traceback" not in out.stderr
    # run refuses it the same way, before starting anything
    out = icn("scenario", "run", str(bad), "--out", str(tmp_path / "out"))
    assert out.returncode == 2 and "unknown time unit" in out.stderr
    assert not (tmp_path / "out").exists()
    out = icn("scenario", "run", str(SCENARIOS / "quickstart.yaml"), "--backend", "docker")
    assert out.returncode == 2 and "use local, netns or ray" in out.stderr


@pytest.mark.slow
def test_a_service_that_never_gets_ready_fails_the_run_cleanly(
    tmp_path: Path, state_dir: Path
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN_SERVICE)
    out = icn("scenario", "run", str(path), "--out", str(tmp_path / "out"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "crasher exited with 1 before" in out.stdout and "logs in" in out.stdout
    # the service's own error is shown (json.loads given a context), the launcher's is not
    assert "TypeError" in out.stdout and "apps/cli/scenario.py" not in out.stdout
    assert not list(state_dir.glob("*.json")), "the run record was not closed"


@pytest.mark.slow
def test_a_crashing_workload_is_reported(tmp_path: Path, state_dir: Path) -> None:
    path = tmp_path / "crashing.yaml"
    path.write_text(CRASHING_WORKLOAD)
    out = icn("scenario", "run", str(path), "--out", str(tmp_path / "out"), "--no-plots")
    assert out.returncode == 0, out.stdout + out.stderr  # no expectation was set
    assert "workload bad exited with code 1" in out.stdout
