"""The producer side of one stream: its batches, served by name, kept until every reader has
them in a checkpoint, and the push-back that stops an operator running ahead of its slowest
reader.

An Interest for a batch not produced yet is held (up to its lifetime) and answered the moment
the batch exists.  Readers report progress with Interests of their own
(``.../ack/<reader>/<consumed>/<durable>``): a stream is shared through PIT aggregation and
caches, so the producer cannot count readers from the batch Interests it sees.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable

from compute.stream.names import Ack, FlowNames
from icn.dataplane.endpoint import Endpoint, Served
from icn.dataplane.handlers import Reply
from icn.dataplane.holding import HoldingTable
from icn.wire.packet import InterestView

MAX_WAITING = 65536  # reply paths waiting for batches not produced yet
HOLD_AHEAD = 4096  # ... for batches at most this far past the newest one
RETAIN_FACTOR = 16  # batches kept for readers' checkpoints: at most buffer x this


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class Outbox:
    """Serves ``stream``'s batches to ``readers``; ``clock`` gives the time (the running
    loop's by default)."""

    def __init__(
        self,
        ep: Endpoint,
        stream: bytes,
        readers: list[str],
        *,
        buffer: int,
        counters: Counter[str],
        next_seq: int = 0,
        positions: dict[str, tuple[int, int]] | None = None,
        max_waiting: int = MAX_WAITING,
        clock: Callable[[], float] = _loop_time,
        lead: float = math.inf,
        reader_window: int | None = None,
    ) -> None:
        self.ep = ep
        self.stream = stream
        self.buffer = buffer
        self.counters = counters
        self.next_seq = next_seq
        # reader -> (consumed, durable); a reader not heard from yet has nothing
        known = positions or {}
        self.positions = {r: known.get(r, (0, 0)) for r in readers}
        self.lead = lead
        # With one reader, its batch Interests say how far it is: a reader asks for batch s
        # only once it has taken batch s - window (its reorder buffer is that long), so the
        # push-back needs no report from it (reports still carry the durable position)
        self._asked_from = readers[0] if reader_window is not None and len(readers) == 1 else None
        self._reader_window = reader_window or 0
        self._wires: dict[int, bytes] = {}
        self._put_at: dict[int, float] = {}  # when each batch no reader has consumed was put
        self._answered: set[int] = set()
        self.waiting: HoldingTable[int, Reply] = HoldingTable(max_waiting)
        self._clock = clock
        self._room = asyncio.Event()
        self._drained = asyncio.Event()
        self._served: Served | None = None
        self._update_room()

    async def start(self, register: bool = True) -> None:
        if self._clock is _loop_time:  # the loop's clock, without looking the loop up each time
            self._clock = asyncio.get_running_loop().time
        self._served = await self.ep.serve(self.stream, self.handle, register=register)

    async def close(self) -> None:
        if self._served is not None:
            await self._served.close()
        self.waiting.clear()

    # ---- producing ---------------------------------------------------------------------------

    @property
    def low(self) -> int:
        """The oldest batch some reader may still need."""
        return min((d for _, d in self.positions.values()), default=self.next_seq)

    def _asked(self, seq: int) -> None:
        reader = self._asked_from
        if reader is None:
            return
        taken = seq - self._reader_window + 1
        consumed, durable = self.positions[reader]
        if taken > consumed:
            self.positions[reader] = (min(taken, self.next_seq), durable)
            if not self._room.is_set():  # more progress cannot take room away
                self._update_room()

    @property
    def slowest(self) -> int:
        return min((c for c, _ in self.positions.values()), default=self.next_seq)

    async def wait_room(self) -> None:
        """Return once one more batch fits: fewer than ``buffer`` batches ahead of the slowest
        reader, none of them put ``lead`` seconds ago or earlier (so a batch waits at most
        about ``lead`` for that reader: latency bounded by time, not only by batches), and
        fewer than ``buffer * 16`` kept for readers' checkpoints."""
        self._update_room()  # the lead is a matter of time: look again
        while not self._room.is_set():
            self.counters["pushed_back"] += 1
            await self._room.wait()

    async def drained(self) -> None:
        """Return once every reader has every batch in a checkpoint (an ended stream's
        producer may go then)."""
        while self.low < self.next_seq:
            self._drained.clear()
            await self._drained.wait()

    def put(self, content: bytes) -> int:
        """Publish ``content`` as the next batch and answer whoever waits for it."""
        seq = self.next_seq
        self.next_seq += 1
        wire = self.ep.make_data(FlowNames.batch(self.stream, seq), content)
        if self.positions:  # a stream nobody reads keeps nothing
            self._wires[seq] = wire
            self._put_at[seq] = self._clock()
        self.counters["batches"] += 1
        if seq in self.waiting:
            for reply in self.waiting.publish(seq, self._clock()):
                self._send(seq, wire, reply)
        self._update_room()
        return seq

    def restore(self, seq: int, content: bytes) -> None:
        """Put back a batch kept in a source's log (before any new one is produced)."""
        self._wires[seq] = self.ep.make_data(FlowNames.batch(self.stream, seq), content)
        self.next_seq = max(self.next_seq, seq + 1)
        self._update_room()

    def _update_room(self) -> None:
        slowest = self.slowest
        ahead = self.next_seq - slowest
        kept = self.next_seq - self.low
        put_at = self._put_at
        while put_at and next(iter(put_at)) < slowest:  # in put order: consumed by all
            del put_at[next(iter(put_at))]
        stale = ahead > 0 and slowest in put_at and self._clock() - put_at[slowest] >= self.lead
        if ahead < self.buffer and kept < self.buffer * RETAIN_FACTOR and not stale:
            self._room.set()
        else:
            self._room.clear()

    def _forget(self) -> None:
        low = self.low
        for seq in [s for s in self._wires if s < low]:
            del self._wires[seq]
            self._answered.discard(seq)

    # ---- answering ---------------------------------------------------------------------------

    def handle(self, iv: InterestView, reply: Reply) -> None:
        what = FlowNames.parse(self.stream, iv.name)
        if isinstance(what, Ack):
            self._on_ack(what, reply, iv.name)
            return
        if what is None:
            self.counters["drop_bad_name"] += 1
            return
        seq = what
        self._asked(seq)
        wire = self._wires.get(seq)
        if wire is not None:
            self._send(seq, wire, reply)
            return
        if seq < self.next_seq:
            # every reader said it had this one in a checkpoint; the asker is not a reader
            # of ours, or restarted from an older checkpoint than it reported
            self.counters["drop_batch_gone"] += 1
            return
        if seq >= self.next_seq + HOLD_AHEAD:
            self.counters["drop_held_full"] += 1
            return
        now = self._clock()
        waiting = self.waiting
        waiting.expire(now)  # room for the live: nobody answers an expired one
        if not waiting.hold(seq, reply, now + iv.lifetime / 1000.0, now):
            self.counters["drop_held_full"] += 1

    def _on_ack(self, ack: Ack, reply: Reply, name: bytes) -> None:
        reply(self.ep.make_data(name, b"", freshness=0))
        self.counters["reports_answered"] += 1
        old = self.positions.get(ack.reader)
        if old is None:
            self.counters["drop_ack_unknown_reader"] += 1
            return
        # reports can arrive out of order: positions only move forward
        new = (
            max(old[0], min(ack.consumed, self.next_seq)),
            max(old[1], min(ack.durable, self.next_seq)),
        )
        if new != old:
            self.positions[ack.reader] = new
            self._forget()
            self._update_room()
            self._drained.set()

    def _send(self, seq: int, wire: bytes, reply: Reply) -> None:
        if seq in self._answered:
            self.counters["batches_resent"] += 1
            self.counters["bytes_resent"] += len(wire)
        else:
            self._answered.add(seq)
            self.counters["batches_sent"] += 1
            self.counters["bytes_sent"] += len(wire)
        reply(wire)
