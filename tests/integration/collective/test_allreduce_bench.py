"""bench/allreduce.py end to end, small: separate processes, each result checked by the bench.

The worker processes, the forwarder and the aggregator are real processes, so chunks in shared
memory cross process boundaries here (a reader maps its peer's memory file through /proc).
The figures are not checked (the guide: no timings in tests), only that every mode ran, and that
the root received references to the chunks, not the chunks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def bench(*extra: str) -> str:
    argv = [sys.executable, str(ROOT / "bench" / "allreduce.py"), "--workers", "3"]
    argv += ["--sizes", "1", "--repeat", "1", "--modes", "in-network,ps", "--timeout", "60"]
    proc = subprocess.run(
        [*argv, *extra], capture_output=True, text=True, timeout=240, cwd=ROOT, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def root_mib(out: str) -> list[float]:
    """The "root MiB" column of each of the two cells."""
    cell = r"^\s+\d+\s+1 MiB\s+(?:in-network|ps)\s+\|\s+\S+\s+\S+\s+(\S+)"
    rows = re.findall(cell, out, re.M)
    assert len(rows) == 2, out
    return [float(x) for x in rows]


def test_every_mode_runs_exact_with_chunks_in_shared_memory() -> None:
    out = bench()  # shared memory is the benchmark's default
    assert "all verified" in out, out
    # references only reached the root (in packets: 3 MiB, every worker's chunk)
    assert all(mib < 0.05 for mib in root_mib(out)), out
