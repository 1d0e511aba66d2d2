"""The idle forwarder's footprint: memory and start-up CPU of a real ``icn fwd`` (issue 23).

A topology of a hundred nodes runs a hundred of these daemons on one machine, and the suite
starts hundreds, so what one costs at rest is a number we keep.  CPU time, not wall time: the
machine may be loaded by other tests.  What the daemon imports is checked in
tests/unit/test_lean_imports.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from apps.procs import ProcessGroup, icn_argv

# Measured: 26.8 MB VmRSS for an idle `icn fwd --unix PATH` (CPython 3.11, uvloop; six runs,
# 26.8-26.9 MB), since fwd's command line is read without typer and the config is checked
# without pydantic (39.6 MB before, 57.4 MB before the lazy imports of issue 23).  NFD idles at
# 18.5 MB.  Issue 23 asks for at most 30 MB, under the measurement plus 25%: that is the bound.
IDLE_RSS_BOUND_MB = 30.0
# Measured: 0.16 s of user+sys CPU to 'forwarder ready' on the 2-core test machine (0.23-0.25 s
# with typer and pydantic, 0.45-0.55 s before the lazy imports).  Generous, so a loaded machine
# cannot fail it; a heavy import can.
START_CPU_BOUND_S = 1.0


def _cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (fields 14 and 15 of /proc/PID/stat, in clock ticks)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024  # kB
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def test_idle_forwarder_rss_and_start_up_cpu(workdir: Path) -> None:
    sock_path = workdir / "fwd.sock"
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock_path)))
        fwd.wait_for("forwarder ready", timeout=30.0, stream="stderr")
        cpu = _cpu_seconds(fwd.pid)
        rss = _rss_mb(fwd.pid)
        assert fwd.stop() == 0
    report = (
        f"idle icn fwd: VmRSS {rss:.1f} MB (bound {IDLE_RSS_BOUND_MB} MB; NFD 18.5 MB), "
        f"{cpu:.2f} s of CPU to 'forwarder ready' (bound {START_CPU_BOUND_S} s)"
    )
    print(report)
    assert rss <= IDLE_RSS_BOUND_MB, report
    assert cpu < START_CPU_BOUND_S, report
