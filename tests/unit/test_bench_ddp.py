"""bench/ddp.py's reading of icn's forwarder-and-aggregator CPU over the kept steps."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.ddp import cpu_between, find_descendant, kept_span


def test_cpu_between_interpolates_between_readings() -> None:
    samples = [(10.0, 1.0), (11.0, 1.5), (12.0, 3.5)]
    assert cpu_between(samples, 10.0, 12.0) == pytest.approx(2.5)
    assert cpu_between(samples, 10.5, 11.5) == pytest.approx((1.5 - 1.25) + (2.5 - 1.5))
    assert cpu_between(samples, 11.0, 11.0) == 0.0


def test_cpu_between_says_none_outside_its_readings() -> None:
    samples = [(10.0, 1.0), (11.0, 1.5)]
    assert cpu_between(samples, 9.0, 10.5) is None
    assert cpu_between(samples, 10.5, 11.5) is None
    assert cpu_between([], 1.0, 2.0) is None


def test_kept_span_leaves_out_the_warm_up_share() -> None:
    # a loop of 10 s ending at t=100: its first 2 of 10 equal steps ran from 90 to 92
    assert kept_span(100.0, 10.0, [1.0] * 10, 2) == pytest.approx((92.0, 100.0))
    # a slow first step takes its larger share
    assert kept_span(100.0, 10.0, [5.0] + [1.0] * 5, 1) == pytest.approx((95.0, 100.0))


def test_find_descendant_walks_down_the_tree() -> None:
    marker = "bench_ddp_marker_module"
    inner = f"import sys, time; sys.argv[0] = '{marker}'; time.sleep(30)"
    outer = (
        "import subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, '-c', {inner!r}, '{marker}']); "
        "print(p.pid, flush=True); p.wait()"
    )
    proc = subprocess.Popen([sys.executable, "-c", outer], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        # a process just started may show an empty command line for a moment: poll, as the
        # bench's watch does
        deadline = time.monotonic() + 10
        while (found := find_descendant(os.getpid(), marker)) is None:
            assert time.monotonic() < deadline, "the grandchild was not found"
            time.sleep(0.01)
        assert found == grandchild
        assert find_descendant(os.getpid(), "no_such_module_here") is None
    finally:
        os.kill(grandchild, 15)
        proc.wait(10)
