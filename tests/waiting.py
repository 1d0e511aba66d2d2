"""The one bounded wait for a condition inside a test's event loop (a process's ready line is
waited for with :meth:`apps.procs.Child.wait_for`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def wait_until(predicate: Callable[[], Any], timeout: float = 5.0) -> None:
    """Poll ``predicate`` until true; fail the test (never hang) after ``timeout`` seconds."""

    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), timeout)
