"""Every script in examples/ runs on its own, as a user runs it from a clone: a process of its
own with no arguments, from another directory than the repository's (what it needs it finds
itself), bounded in time; it exits 0, prints its key line, and leaves no traceback or
unfinished task behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import has_module, needs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIMIT = 60.0  # seconds a script may take here (each takes a few on two busy cores)

# script -> a line it prints only when everything it checks held
KEY_LINES = {
    "hello_function.py": "/hello/greet('world') -> 'hello, world'",
    "allreduce_local.py": "allreduce ok: 4 workers, 100,000 floats each, every element of the "
    "sum is 10 at every worker",
    "stream_graph.py": "stream graph /example/sensors done: 9 window means printed",
    "ddp_train.py": "ddp over icn ok: 2 ranks, 5 steps",
    "tasks_mapreduce.py": "tasks ok: word count exact on 2 executors, pi within 0.01",
}
TORCH = needs(has_module("torch"), "ddp_train.py needs torch (pip install -e .[torch])")


def run_example(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NDN_CLIENT_TRANSPORT", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,  # kills the script (and fails the test) past it
    )


def test_every_example_is_listed_here() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py")} - {"sensors.py"}  # (a module, not a script)
    assert scripts == set(KEY_LINES)


@pytest.mark.parametrize(
    "script",
    [
        "hello_function.py",
        "allreduce_local.py",
        "stream_graph.py",
        "tasks_mapreduce.py",
        pytest.param("ddp_train.py", marks=TORCH),
    ],
)
def test_example_runs_to_its_key_line(script: str, workdir: Path) -> None:
    proc = run_example(script, cwd=workdir)
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    assert KEY_LINES[script] in proc.stdout, proc.stdout[-3000:]
    for bad in ("Traceback", "Exception ignored", "was destroyed but it is pending", "Unclosed"):
        assert bad not in proc.stderr, f"{script}: {bad!r} on stderr:\n{proc.stderr[-3000:]}"
    assert list(workdir.iterdir()) == []  # nothing left in the directory it ran from
