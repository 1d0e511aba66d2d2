"""Link shaper: delay, jitter, loss and rate on a face's send path, for emulation without root.

It sits between a face's link service and its transport (see ``Face.set_shaper``), so it
shapes whatever the link service emits: bare packets, LpPackets and fragments alike.

Every packet gets one departure time:
``max(now, link_free) + size*8/rate`` (serialization at ``rate``) ``+ delay + uniform(-jitter,
jitter)``.  Pending packets sit in one heap ordered by (departure, arrival order) behind a single
timer, so a burst costs one timer, not one per packet, and equal departure times (jitter 0)
leave in the order they came.  Jitter may reorder packets, as netem's does.  Randomness comes
from a private ``random.Random(seed)``, and time from injected ``clock``/``call_later``, so tests
are deterministic and need no sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from forwarder.face_api import Counters
from icn.errors import ConfigError

# A timer may fire this early (uvloop rounds timers to milliseconds); sending a packet that
# much ahead of time is harmless, spinning on a re-armed zero-delay timer is not.
_TIMER_SLACK = 0.001


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], TimerHandle]


@dataclass(frozen=True, slots=True)
class ShaperConfig:
    """What to emulate on one direction of a link.  Times in seconds, ``rate`` in bits/s."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    rate: float | None = None
    # bytes allowed to wait for serialization at ``rate`` (a router's output queue)
    queue_limit: int = 1 << 20
    # packets allowed in the shaper at once, whatever the reason they wait
    max_pending: int = 65536
    seed: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.loss <= 1.0:
            raise ConfigError(f"shaper loss must be a probability in [0, 1], got {self.loss}")
        if self.delay < 0 or self.jitter < 0:
            raise ConfigError("shaper delay and jitter must be >= 0 seconds")
        if self.rate is not None and self.rate <= 0:
            raise ConfigError(f"shaper rate must be > 0 bits/s (or None), got {self.rate}")
        if self.queue_limit <= 0 or self.max_pending <= 0:
            raise ConfigError("shaper queue_limit and max_pending must be > 0")

    @property
    def passthrough(self) -> bool:
        """True when nothing but loss is configured: packets never wait."""
        return self.delay == 0 and self.jitter == 0 and self.rate is None


class Shaper:
    """Shapes one send path: ``send(wire)`` in, ``output(wire)`` out, later or never."""

    def __init__(
        self,
        config: ShaperConfig,
        output: Callable[[bytes], None],
        *,
        counters: Counters[str],
        call_later: CallLater | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if call_later is None or clock is None:
            loop = asyncio.get_running_loop()
            call_later = call_later or _loop_call_later(loop)
            clock = clock or loop.time
        self.config = config
        self._output = output
        self._counters = counters
        self._call_later = call_later
        self._clock = clock
        self._rng = random.Random(config.seed)
        self._loss = config.loss
        self._rate = config.rate
        self._delay = config.delay
        self._jitter = config.jitter
        self._passthrough = config.passthrough
        self._link_free_at = 0.0
        self._heap: list[tuple[float, int, bytes]] = []
        self._seq = 0
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0
        self._closed = False
        # packets this shaper dropped (loss and full queue), for per-face reports; the shared
        # counters hold the daemon-wide totals by reason
        self.dropped = 0

    @property
    def pending(self) -> int:
        return len(self._heap)

    def set_output(self, output: Callable[[bytes], None]) -> None:
        """Send shaped packets to ``output`` from now on (a capture tapped the face)."""
        self._output = output

    def send(self, wire: bytes) -> None:
        if self._closed:
            return
        if self._loss and self._rng.random() < self._loss:
            self._counters["shaper.loss"] += 1
            self.dropped += 1
            return
        if self._passthrough:
            self._output(wire)
            return
        if len(self._heap) >= self.config.max_pending:
            self._counters["shaper.queue_full"] += 1
            self.dropped += 1
            return
        now = self._clock()
        departure = now
        if self._rate is not None:
            free = self._link_free_at
            if free > now:
                backlog = (free - now) * self._rate / 8.0
                if backlog + len(wire) > self.config.queue_limit:
                    self._counters["shaper.queue_full"] += 1
                    self.dropped += 1
                    return
            else:
                free = now
            departure = free + len(wire) * 8.0 / self._rate
            self._link_free_at = departure
        departure += self._delay
        if self._jitter:
            departure = max(now, departure + self._rng.uniform(-self._jitter, self._jitter))
        self._seq += 1
        heapq.heappush(self._heap, (departure, self._seq, wire))
        self._arm(now)

    def _arm(self, now: float) -> None:
        """Make the one timer fire at the earliest departure."""
        head = self._heap[0][0]
        if self._timer is not None:
            if self._timer_at <= head:
                return
            self._timer.cancel()
        self._timer_at = head
        self._timer = self._call_later(max(0.0, head - now), self._flush)

    def _flush(self) -> None:
        self._timer = None
        now = self._clock()
        heap = self._heap
        limit = now + _TIMER_SLACK
        while heap and heap[0][0] <= limit:
            wire = heapq.heappop(heap)[2]
            self._output(wire)
            if self._closed:  # output closed the face
                return
        if heap:
            self._arm(now)

    def close(self) -> None:
        """Drop whatever is still waiting (counted): the face is going away, or its link is
        reconfigured."""
        self._closed = True
        self.dropped += len(self._heap)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()


def _loop_call_later(loop: asyncio.AbstractEventLoop) -> CallLater:
    def call_later(delay: float, callback: Callable[[], Any]) -> TimerHandle:
        return loop.call_later(delay, callback)

    return call_later
