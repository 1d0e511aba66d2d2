"""bench/loops.py: the event loop a benchmark's process ran, seen rather than guessed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from bench import loops


async def _running() -> str:
    return loops.running()


def test_running_names_the_loop_that_runs() -> None:
    assert asyncio.run(_running()) == loops.ASYNCIO
    uvloop = pytest.importorskip("uvloop")
    assert uvloop.run(_running()) == loops.UVLOOP


def test_of_pid_reads_what_a_process_loaded() -> None:
    plain = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert plain.stdout is not None and plain.stdout.readline() == b"up\n"
        assert loops.of_pid(plain.pid) == loops.ASYNCIO
    finally:
        assert plain.stdin is not None
        plain.stdin.close()
        plain.wait(10)
    assert loops.of_pid(plain.pid) == loops.UNKNOWN  # ended and reaped
    if _imports("uvloop"):  # loaded into this process: its memory map shows it
        assert loops.of_pid(os.getpid()) == loops.UVLOOP


def _imports(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def test_from_ready_and_summary() -> None:
    assert loops.from_ready("starting\nrelay ready uvloop\nbye\n", "relay ready") == "uvloop"
    assert loops.from_ready("ready 4242 asyncio\n", "ready") == "asyncio"
    assert loops.from_ready("relay ready\nuvloop\n", "relay ready") == loops.UNKNOWN
    assert loops.from_ready("nothing", "relay ready") == loops.UNKNOWN
    assert loops.summary({"a": "uvloop", "b": "uvloop"}) == "uvloop (every process)"
    assert loops.summary({"a": "uvloop", "b": "asyncio"}) == "a uvloop, b asyncio"
    assert loops.summary({"a": "asyncio"}) == "a asyncio"
