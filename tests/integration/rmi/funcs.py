"""Functions served in the RMI tests; ``RAN`` counts what actually ran in this process, and
``GATE`` holds ``held`` and ``held_in_thread`` until the test opens it (the ``line`` fixture
closes it before each test and opens it after)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections import Counter

import numpy as np

from compute.rmi import Caller, function

RAN: Counter[str] = Counter()
ALLOWED: set[str] = set()  # fingerprints the tests allow to call `guarded`
GATE = threading.Event()
GATE_LIMIT = 120.0  # s: a gate never opened fails the job rather than hold a thread forever


@function
def echo(value: object) -> object:
    RAN["echo"] += 1
    return value


@function(pure=True)
def add(a: int, b: int) -> int:
    RAN["add"] += 1
    return a + b


@function(duration=5.0)
async def slow(seconds: float) -> str:
    RAN["slow"] += 1
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@function(duration=0.5)
def blocking(seconds: float) -> float:
    """Sleeps in a worker thread: the server's loop keeps answering meanwhile."""
    import time

    RAN["blocking"] += 1
    time.sleep(seconds)
    return seconds


@function(duration=0.3)
async def held() -> str:
    """Takes a job slot until the test opens ``GATE``, however long the test needs it."""
    RAN["held"] += 1
    while not GATE.is_set():
        await asyncio.sleep(0.005)
    return "released"


@function(duration=0.5)
def held_in_thread() -> str:
    """Blocks its worker thread until the test opens ``GATE``."""
    RAN["held_in_thread"] += 1
    if not GATE.wait(GATE_LIMIT):
        raise TimeoutError("the test never opened the gate")
    return "released"


def _allowed(caller: Caller) -> bool:
    return caller.fingerprint in ALLOWED


@function(authorize=_allowed)
def guarded(x: int) -> int:
    RAN["guarded"] += 1
    return x * 2


@function
def boom(code: int) -> None:
    RAN["boom"] += 1
    raise ValueError(f"bad input {code}")


@function
def digest(blob: bytes) -> dict[str, object]:
    RAN["digest"] += 1
    return {"size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}


@function
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b


@function(cpu_bound=True)
def cpu_pid(n: int) -> tuple[int, int]:
    """Runs in the process pool: returns the worker's pid and a CPU-bound sum."""
    return os.getpid(), sum(range(n))


@function
def big_result(size: int) -> bytes:
    return bytes(range(256)) * (size // 256)
