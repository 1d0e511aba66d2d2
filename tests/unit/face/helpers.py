"""Test doubles for faces: a recording packet sink, a fake clock/scheduler, a manual call_soon."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from icn.wire.lp import LpView


class RecordingSink:
    """A PacketSink that remembers what it received: (face_id, wire, lp) per packet."""

    def __init__(self) -> None:
        self.interests: list[tuple[int, bytes, LpView | None]] = []
        self.data: list[tuple[int, bytes, LpView | None]] = []
        self.nacks: list[tuple[int, bytes, LpView]] = []

    def receive_interest(self, face_id: int, wire: bytes, lp: LpView | None) -> None:
        self.interests.append((face_id, wire, lp))

    def receive_data(self, face_id: int, wire: bytes, lp: LpView | None) -> None:
        self.data.append((face_id, wire, lp))

    def receive_nack(self, face_id: int, interest_wire: bytes, lp: LpView) -> None:
        self.nacks.append((face_id, interest_wire, lp))

    @property
    def total(self) -> int:
        return len(self.interests) + len(self.data) + len(self.nacks)


class FakeHandle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Virtual time with ``call_later``: ``advance`` runs due callbacks in time order."""

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, Callable[[], None], FakeHandle]] = []
        self._seq = 0

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeHandle:
        assert delay >= 0, delay
        handle = FakeHandle()
        self._seq += 1
        heapq.heappush(self._timers, (self.now + delay, self._seq, callback, handle))
        return handle

    @property
    def pending_timers(self) -> int:
        return sum(1 for t in self._timers if not t[3].cancelled)

    def advance(self, seconds: float) -> None:
        target = self.now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, callback, handle = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            if not handle.cancelled:
                callback()
        self.now = target

    def run_all(self) -> None:
        while self._timers:
            self.advance(max(0.0, self._timers[0][0] - self.now))


class ManualSoon:
    """A call_soon that queues callbacks until ``run`` (deliveries happen only when asked)."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []

    def __call__(self, callback: Callable[[], None]) -> None:
        self.callbacks.append(callback)

    def run(self) -> None:
        while self.callbacks:
            batch, self.callbacks = self.callbacks, []
            for callback in batch:
                callback()
