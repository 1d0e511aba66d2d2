"""``--cpu-report`` (tests/cpu_per_test.py) counts a test's CPU with its child processes'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cpu_per_test import ROOTS
from tests.needs import is_root_with, needs

pytestmark = needs(
    is_root_with() and any((r / "cgroup.controllers").exists() for r in ROOTS),
    "--cpu-report needs root and a cgroup v2 mount",
)

BURN = """
import subprocess, sys, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\n"
                    "while time.process_time() < end: pass"], check=True)

def test_idle():
    time.sleep(0.2)
"""


def test_a_childs_cpu_counts_in_its_test_and_an_idle_test_uses_none(tmp_path: Path) -> None:
    (tmp_path / "test_burn.py").write_text(BURN)
    before = set(Path("/sys/fs/cgroup/unified").glob("icn-test-cpu-*"))
    report = tmp_path / "cpu.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "tests.cpu_per_test", "--cpu-report", str(report), str(tmp_path / "test_burn.py")],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        r["test"].split("::")[-1]: r for r in map(json.loads, report.read_text().split("\n")[:-1])
    }
    assert rows["test_burns_in_a_child"]["cpu_s"] >= 0.25  # the child's 0.3 s
    assert rows["test_idle"]["cpu_s"] < 0.1 and rows["test_idle"]["wall_s"] >= 0.2
    assert "CPU per test file" in done.stdout
    assert set(Path("/sys/fs/cgroup/unified").glob("icn-test-cpu-*")) <= before  # removed
