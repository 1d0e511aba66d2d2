"""Tasks and actors the task-platform tests run on real executors (which import this module)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from compute.tasks import actor, task

# each run of a traced task leaves a file here: how many times a task really ran
RUNS = os.environ.get("ICN_TEST_RUNS", "")


def _trace(what: str) -> None:
    if RUNS:
        name = f"{what}-{os.getpid()}-{time.monotonic_ns()}"
        part = Path(RUNS) / f".{name}"
        part.write_text(str(os.getpid()))
        part.rename(Path(RUNS) / name)  # whole or not there: a reader never sees it empty


@task
def add(a: int, b: int) -> int:
    return a + b


@task(deterministic=True)
def square(x: int) -> int:
    _trace(f"square{x}")
    return x * x


@task(deterministic=True)
def slow_square(x: int, seconds: float) -> int:
    """Marks its start (so a test knows where it runs), then takes ``seconds``."""
    _trace(f"slow{x}")
    time.sleep(seconds)
    return x * x


@task
def blob(n: int) -> bytes:
    _trace(f"blob{n}")
    return bytes(range(256)) * (n // 256)


@task
def length(data: bytes) -> int:
    return len(data)


@task
def where() -> int:
    return os.getpid()


@task
def thread_name(seconds: float = 0.0) -> str:
    if seconds:  # (sleep(0) gives the CPU away: on a busy machine that alone takes ms)
        time.sleep(seconds)
    return threading.current_thread().name


@task
def fails(x: int) -> int:
    raise ValueError(f"no good: {x}")


@task(memory=1 << 30)
def needs_a_gib() -> int:
    return os.getpid()


@actor
class Tally:
    """An actor whose state must survive its executor."""

    def __init__(self, start: int) -> None:
        self.total = start
        self.calls = 0

    def add(self, k: int) -> int:
        self.total += k
        self.calls += 1
        return self.total

    def pid(self) -> int:
        return os.getpid()
