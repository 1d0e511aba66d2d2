"""An event loop on a virtual clock, for tests of I/O-free code on asyncio (the RMI server's
timers, the fetcher over an in-memory producer, an endpoint over a memory face): a bound on
``loop.time()`` is then the product's, never the CPU's.

``loop.time()`` starts at 1000.0 and moves only when nothing is ready to run: the loop jumps
to its next timer at once instead of sleeping until it, so ``asyncio.sleep(0.4)`` takes no real
time and every callback that was ready ran before it ends.  Sockets and pipes still work (they
are looked at without waiting before each jump), and with no timer at all the loop waits for
them for real.  Work in threads takes no virtual time: a test whose thread must finish before
a timer fires is not one for this loop.

Use :func:`virtual_time` on an ``async def`` test: it runs the test on a fresh loop of this
kind (fixtures are passed through; an async fixture would be on pytest-asyncio's loop, so
make what the test needs inside it).
"""

from __future__ import annotations

import asyncio
import functools
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec

P = ParamSpec("P")

START = 1000.0


class _JumpingSelector(selectors.DefaultSelector):
    """The real selector, except that a wait with a timeout moves the loop's clock instead."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None or self.loop is None:  # no timer: only I/O can wake the loop
            return super().select(timeout)
        self.loop.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` jumps to the next timer when nothing is ready."""

    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        self.now = START
        selector.loop = self

    def time(self) -> float:
        return self.now


def virtual_time(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """Run the ``async def`` test ``test`` on a :class:`VirtualTimeLoop` of its own."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            runner.run(test(*args, **kwargs))

    return run
