"""bench/allreduce_net.py on the real kernel: its racks and spine aggregate, one copy of the sum
crosses each uplink (with two spines: over the one the sum is routed to, or split between them
by the multipath strategy), and its namespaces and processes are gone after the run, also when
it is stopped halfway.

Needs root and iproute2 (CI has both, and fails without them; skipped elsewhere, see
tests/needs.py).  Only the in-network mode runs (the gloo peer needs torch, which the test
install leaves out), two workers per rack, 1 MiB on fast links: this checks the wiring, not the
figures.  The bench's temporary directory is put under
this test's own (TMPDIR), so its processes are found by that path and no one else's are touched.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from apps.scenario.runs import list_namespaces
from tests.needs import is_root_with, needs

pytestmark = needs(
    is_root_with("ip", "tc"), "bench/allreduce_net.py needs root, ip and tc (iproute2)"
)

ROOT = Path(__file__).resolve().parents[3]
ARGS = ["--modes", "in-network", "--per-rack", "2", "--sizes", "1", "--repeat", "1"]
ARGS += ["--mbit", "400"]


def bench(workdir: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(workdir), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, str(ROOT / "bench" / "allreduce_net.py"), *ARGS, *extra]
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def ours(workdir: Path) -> list[int]:
    """PIDs of processes whose command line names this test's directory (the bench's
    forwarders and workers carry paths under it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(workdir).encode() in cmdline:
            found.append(int(entry.name))
    return found


def left_by(out: str) -> list[str]:
    """The namespaces of the run whose output is ``out`` that still exist.  Only its own: other
    tests (this file's included, on other workers) make namespaces at the same time."""
    m = re.search(r"^namespaces: (icn-[0-9a-f]{6}-)\*$", out, re.M)
    assert m is not None, out
    return [ns for ns in list_namespaces() if ns.startswith(m.group(1))]


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def test_racks_aggregate_and_one_sum_crosses_each_uplink(workdir: Path) -> None:
    proc = bench(workdir)
    try:
        out, _ = proc.communicate(timeout=150)
    finally:
        stop(proc)
    assert proc.returncode == 0, out
    # every result was checked bit for bit by the bench (a wrong one fails the run)
    pattern = r"^\s*400 +1 MiB +in-network \| +[\d.]+ +\| +([\d.]+) +([\d.]+) +\d+ \|"
    row = re.search(pattern, out, re.M)
    assert row is not None, out
    up, down = float(row.group(1)), float(row.group(2))
    # a rack sends its partial sum up and gets the sum down once, whatever its worker count:
    # 1 MiB each way plus headers, Interests and the barrier (gloo's ring would carry 1.75 MiB)
    assert 1.0 <= up < 1.4 and 1.0 <= down < 1.4, out
    assert not left_by(out), f"the bench left namespaces behind:\n{out[-3000:]}"
    assert not ours(workdir)


def test_two_spines_single_path_uses_one_and_multipath_splits_the_chunks(workdir: Path) -> None:
    proc = bench(workdir, "--spines", "2", "--modes", "in-network,multipath")
    try:
        out, _ = proc.communicate(timeout=150)
    finally:
        stop(proc)
    assert proc.returncode == 0, out
    rows = {}
    for mode in ("in-network", "multipath"):
        pattern = (
            rf"^\s*400 +1 MiB +{mode} +\| +[\d.]+ +\| +([\d.]+) +([\d.]+) +\d+ \|.*"
            r"spines (\d+)/(\d+) %$"
        )
        row = re.search(pattern, out, re.M)
        assert row is not None, out
        rows[mode] = [float(v) for v in row.groups()]
    # single path: every chunk over the first spine; multipath: the chunks alternate, and each
    # is summed by one root only (both racks chose the same spine for it), so each rack still
    # sends its partial up once in all and gets the sum once: 1 MiB plus headers each way
    assert rows["in-network"][2:] == [100, 0], out
    assert 45 <= rows["multipath"][2] <= 55 and 45 <= rows["multipath"][3] <= 55, out
    for up, down, _, _ in rows.values():
        assert 1.0 <= up < 1.4 and 1.0 <= down < 1.4, out
    assert re.search(
        r"^net: multipath/single-path time ratio: [\d.]+ \(at 400 Mbit/s\)$", out, re.M
    )
    assert not left_by(out), f"the bench left namespaces behind:\n{out[-3000:]}"
    assert not ours(workdir)


def test_stopped_halfway_it_removes_namespaces_and_processes(workdir: Path) -> None:
    proc = bench(workdir, "--repeat", "50")
    try:
        deadline = time.monotonic() + 60
        # wait for the forwarders and workers (with their paths under workdir) to run
        while len(ours(workdir)) < 7 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert len(ours(workdir)) >= 7, "the bench's processes did not start"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert "interrupted" in out, out
    # the bench's own words say why (a teardown that failed names the command)
    assert not left_by(out), f"namespaces left behind:\n{out[-3000:]}"
    deadline = time.monotonic() + 10
    while ours(workdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ours(workdir), "processes left behind"
