"""bench/stream.py keeps working: a small run of ours in one process and one process per
operator, with the vectorized map, checked against its reference (the benchmark fails on any
wrong result), and the plain asyncio peer; bytewax is not needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_small_stream_benchmark_runs_and_checks_its_results() -> None:
    argv = [sys.executable, str(ROOT / "bench" / "stream.py"), "--records", "20000"]
    argv += ["--keys", "10", "--only", "ours-vec,ours-procs-vec,asyncio"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "all equal to the reference" in out
    for row in ("ours (1 process, vec)", "ours (procs, vec map)", "asyncio queues"):
        assert row in out, out
    assert "ours-procs-vec/asyncio" in out


def test_the_latency_curve_runs_and_draws_its_plot(tmp_path: Path) -> None:
    out = tmp_path / "curve.png"
    argv = [sys.executable, str(ROOT / "bench" / "stream_curve.py"), "--records", "20000"]
    argv += ["--points", "2,4,0.05 4,4,0.01", "--out", str(out)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stream curve: 4 runs" in proc.stdout.splitlines()[-1]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "stream_curve.py"), "--points", "1,4,0.05"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "buffer >= 2" in bad.stderr
