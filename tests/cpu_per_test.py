"""Where the suite's CPU goes: ``--cpu-report FILE`` writes, per test, the CPU time used by the
test's worker and every process it started (forwarders, services, Ray's daemons, torch ranks,
busy loops of a saturated run), with its wall time, as JSON lines; a summary per file at the
end.  Off unless asked (a plugin loaded by tests/conftest.py).

Each pytest process (each xdist worker) moves itself into a cgroup v2 of its own, which its
children inherit, so a test's CPU is the cgroup's ``usage_usec`` over the test, daemons that
outlive it counted in the tests after it on that worker.  Needs root and a writable cgroup v2
mount (``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified``); elsewhere the option says why and
the suite runs unmeasured.  The cgroup is removed at the end (emptied back into its parent).
Give the file with ``=``: pytest-xdist's workers parse the command line before this plugin
(loaded by tests/conftest.py) adds the option, and a separate value is taken for a path to
test (the workers then fail on ``--cpu-report``).

    .venv/bin/python -m pytest -n 4 --dist loadgroup --cpu-report=/tmp/cpu.jsonl
    .venv/bin/python -m tests.cpu_per_test /tmp/cpu.jsonl   # the summary again, by file
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))


class Meter:
    """This process's cgroup and the report it appends to."""

    def __init__(self, group: Path, parent: Path, out: Path) -> None:
        self.group = group
        self.parent = parent
        self.out = out.open("a")

    @classmethod
    def start(cls, out: Path) -> Meter | str:
        """In a fresh cgroup, or why not."""
        for root in ROOTS:
            if (root / "cgroup.procs").exists() and (root / "cgroup.controllers").exists():
                group = root / f"icn-test-cpu-{os.getpid()}"
                try:
                    group.mkdir()
                    (group / "cgroup.procs").write_text(str(os.getpid()))
                except OSError as exc:
                    return f"cannot make a cgroup under {root}: {exc}"
                return cls(group, root, out)
        return "no cgroup v2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified"

    def usage(self) -> float:
        for line in (self.group / "cpu.stat").read_text().splitlines():
            key, value = line.split()
            if key == "usage_usec":
                return int(value) / 1e6
        return 0.0

    def write(self, row: dict[str, Any]) -> None:
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()

    def close(self) -> None:
        self.out.close()
        try:  # back into the parent with whatever is left, then remove the emptied group
            for pid in (self.group / "cgroup.procs").read_text().split():
                (self.parent / "cgroup.procs").write_text(pid)
            self.group.rmdir()
        except OSError:
            pass


_meter: Meter | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        metavar="FILE",
        help="write each test's CPU time (its processes included) and wall time to FILE "
        "(JSON lines; needs root and cgroup v2)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _meter
    out = config.getoption("--cpu-report")
    if not out:
        return
    path = Path(out)
    is_controller = os.environ.get("PYTEST_XDIST_WORKER") is None and bool(
        getattr(config.option, "numprocesses", None)
    )
    if is_controller:  # the workers measure; the controller only starts the file afresh
        path.write_text("")
        return
    started = Meter.start(path)
    if isinstance(started, str):
        print(f"--cpu-report: not measured: {started}", file=sys.stderr)
        return
    _meter = started


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    meter = _meter
    if meter is None:
        yield
        return
    cpu0, wall0 = meter.usage(), time.monotonic()
    yield
    meter.write(
        {
            "test": item.nodeid,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "cpu_s": round(meter.usage() - cpu0, 3),
            "wall_s": round(time.monotonic() - wall0, 3),
        }
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    global _meter
    if _meter is not None:
        _meter.close()
        _meter = None


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    out = config.getoption("--cpu-report")
    if out and Path(out).exists() and Path(out).stat().st_size:
        terminalreporter.write_sep("=", f"CPU per test file (from {out})")
        for line in summary(Path(out), 15):
            terminalreporter.write_line(line)


def summary(path: Path, top: int) -> list[str]:
    """The ``top`` files by CPU time, with their wall time and tests, and the totals."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cpu: Counter[str] = Counter()
    wall: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for row in rows:
        name = row["test"].split("::")[0]
        cpu[name] += row["cpu_s"]
        wall[name] += row["wall_s"]
        count[name] += 1
    lines = [f"{'CPU s':>8} {'wall s':>8} {'tests':>6}  file"]
    for name, seconds in cpu.most_common(top):
        lines.append(f"{seconds:8.1f} {wall[name]:8.1f} {count[name]:6d}  {name}")
    lines.append(
        f"{sum(cpu.values()):8.1f} {sum(wall.values()):8.1f} {len(rows):6d}  all "
        f"({len({r['worker'] for r in rows})} workers)"
    )
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.cpu_per_test REPORT.jsonl")
    print("\n".join(summary(Path(sys.argv[1]), 40)))
