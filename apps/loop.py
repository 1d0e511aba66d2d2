"""Run a coroutine as a program's main loop: the one place that picks uvloop or asyncio.

A leaf module, so the CLI, the scenario entry points, the demo and the benchmarks can run a
loop without importing ``apps.cli`` (which imports them all)."""

from __future__ import annotations

import asyncio
from typing import Any


def run_loop(coro: Any) -> Any:
    """Run a coroutine on uvloop when installed, else asyncio."""
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)
