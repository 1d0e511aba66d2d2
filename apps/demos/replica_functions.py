"""Functions served by the replicas of scenarios/replicas.yaml and scenarios/straggler.yaml,
with the misbehaviour those scenarios give one replica (set by ``apps.rmi_entries:server``).

- ``work(n, ms)`` (not idempotent): ``ms`` milliseconds of work, ``slow_factor`` times longer
  once the server has been told to slow down (a scenario's ``signal`` fault).
- ``square(n, ms)`` (pure): the same work; every ``stall_every``-th call that reaches this
  replica stalls ``stall_for`` seconds first (a straggler: a GC pause, a noisy neighbour).

The work is an ``asyncio.sleep``: the replica's time, not the machine's CPU, which the
scenario's other processes share.  A coroutine is cancelled where it sleeps, so a clone that
lost the race stops at once on its server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from compute.rmi import function


@dataclass
class Misbehaviour:
    """How this process's replica misbehaves (one replica per process)."""

    slow_factor: float = 1.0  # applied once ``slowed`` is set
    slowed: bool = False
    stall_every: int = 0  # 0: never
    stall_for: float = 0.0
    calls: int = 0

    def delay(self, ms: float) -> float:
        """Seconds the next call takes, counting it."""
        self.calls += 1
        seconds = max(0.0, ms) / 1000.0
        if self.slowed:
            seconds *= self.slow_factor
        if self.stall_every and self.calls % self.stall_every == 0:
            seconds += self.stall_for
        return seconds


MISBEHAVIOUR = Misbehaviour()


@function(duration=0.01)
async def work(n: int, ms: float = 10.0) -> int:
    """``ms`` milliseconds of work on ``n`` (slower once this replica is slowed down)."""
    await asyncio.sleep(MISBEHAVIOUR.delay(ms))
    return n


@function(pure=True, duration=0.01)
async def square(n: int, ms: float = 10.0) -> int:
    """``n`` squared after ``ms`` milliseconds (and a stall every so many calls, here)."""
    await asyncio.sleep(MISBEHAVIOUR.delay(ms))
    return n * n
