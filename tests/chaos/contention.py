"""CPU contention for fault tests: busy processes started and stopped by PID, and a time scale.

:class:`Contention` starts a busy process per core that other test workers do not already
load (:func:`saturating_processes`), at normal priority (a Python loop with nothing else to do),
so that whatever the test starts gets only a share of the CPU, as on a loaded machine.  Each
busy process is stopped by its PID (SIGKILL, then reaped) when the contention ends; in case the
test process itself dies first, each one also exits by itself when its parent is gone or after
``max_life`` seconds.

:func:`time_scale` says how much slower the machine is now than when the session started: it
times a fixed CPU-bound calibration loop now and compares it with the quickest run of the same
loop measured once per session (before any contention), clamped to [1, MAX_SCALE].  Fault tests
multiply their deadlines by it instead of using budgets loosened for the worst case.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

MAX_SCALE = 8.0  # beyond this a deadline no longer means anything: the test should fail
CALIBRATION_ROUNDS = 60_000  # about 3-5 ms per round on a quiet 2020s core
_baseline: float | None = None

# The busy loop: spins, looking up every ~0.1 s (a few hundred thousand iterations) whether its
# parent is still there and whether its own life has run out
BUSY = """
import os, sys, time
parent, end = os.getppid(), time.monotonic() + float(sys.argv[1])
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(200_000):
        pass
"""


def saturating_processes() -> int:
    """Busy processes that saturate the cores the other test workers do not already load: one
    per core in a run of its own; under pytest-xdist, the cores less the other workers (at
    least one).  With 4 workers on 2 cores the other 3 already compete for the cores, and a busy
    process per core on top burnt a sixth of the suite's CPU (102 of ~610 CPU s in one run)
    while it slowed every other test beside it, not the one under fault more."""
    cores = os.cpu_count() or 1
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(1, cores - (workers - 1))


def _calibration_round() -> float:
    """Seconds one fixed piece of CPU-bound work takes right now."""
    started = time.perf_counter()
    total = 0
    for i in range(CALIBRATION_ROUNDS):
        total += i * i % 7
    assert total >= 0
    return time.perf_counter() - started


def measure(rounds: int = 7) -> float:
    """The median time of ``rounds`` calibration rounds (the median: under contention single
    rounds land inside or outside the scheduler's slices of the CPU).  A round quicker than the
    baseline lowers it (see :func:`baseline`)."""
    global _baseline
    times = sorted(_calibration_round() for _ in range(rounds))
    if _baseline is not None and times[0] < _baseline:
        _baseline = times[0]
    return times[len(times) // 2]


def baseline() -> float:
    """The quickest calibration round of this session: measured at first use (the session's
    start, before any contention), and lowered by any quicker round measured later.  The start
    is not always quiet: the suite's workers start together, three on two cores, each
    importing its tests, and a baseline taken then was up to twice the quiet time (a loaded
    measurement then looked like no load)."""
    global _baseline
    if _baseline is None:
        _baseline = min(_calibration_round() for _ in range(15))
    return _baseline


def time_scale() -> float:
    """How many times slower CPU-bound work runs now than at the session's quiet start, in
    [1, MAX_SCALE]."""
    return max(1.0, min(MAX_SCALE, measure() / baseline()))


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a live process has used, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14, 15)


class Contention:
    """``with Contention() as c:`` ... :func:`saturating_processes` busy processes
    (``processes`` to choose),
    each stopped by its PID at the end, even when the body raised."""

    def __init__(self, processes: int | None = None, max_life: float = 900.0) -> None:
        self.processes = processes or saturating_processes()
        self.max_life = max_life
        self.children: list[subprocess.Popen[bytes]] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.children]

    def start(self, running_within: float = 10.0) -> None:
        """Start the busy processes and wait (bounded) until each has used some CPU."""
        baseline()  # measured before the contention, if not yet
        try:
            for _ in range(self.processes):
                self.children.append(
                    subprocess.Popen(
                        [sys.executable, "-S", "-c", BUSY, str(self.max_life)],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            deadline = time.monotonic() + running_within
            while not all(self._spinning(p) for p in self.children):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"busy processes {self.pids} did not start spinning within "
                        f"{running_within} s"
                    )
                time.sleep(0.01)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _spinning(p: subprocess.Popen[bytes]) -> bool:
        if p.poll() is not None:
            raise RuntimeError(f"busy process {p.pid} exited with {p.returncode}")
        return cpu_seconds(p.pid) >= 0.05  # past the interpreter's start-up, in the loop

    def stop(self, grace: float = 10.0) -> None:
        """SIGKILL each busy process by its PID and reap it (bounded)."""
        children, self.children = self.children, []
        for p in children:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        for p in children:
            p.wait(grace)

    def __enter__(self) -> Contention:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
