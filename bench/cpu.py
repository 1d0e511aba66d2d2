"""CPU time of another process, threads included, as the benchmarks read it (Linux /proc)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (schedstat: nanoseconds on a CPU).  Raises
    OSError when the process is gone."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        # a thread may end between the listing and the read
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9
