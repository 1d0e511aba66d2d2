"""The reader side of one stream: batches pulled in sequence with a window of Interests that
adapts, handed over in order, each once.

The window grows by one per window of batches received (additive increase) and halves, at
most once per round trip, when a batch is found lost or comes back with a congestion mark
(multiplicative decrease).  A batch counts as lost when three later ones arrived since it was
asked for (then it is asked again at once), or when it is older than a later arrival by more
than the retransmission timeout.  An Interest that expires while no later batch has come is
not a loss: the producer has not produced it yet, so it is asked again without shrinking the
window.  A Nack (no route yet: the producer is starting) is retried after a pause that doubles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from functools import partial

from compute.stream.batch import NO_WATERMARK, Batch, decode_batch
from compute.stream.errors import StreamError
from compute.stream.names import FlowNames
from icn.endpoint import Endpoint, PendingInterest
from icn.errors import IcnError, InterestNack, InterestTimeout, TooManyPending
from icn.name import to_uri
from icn.packet import DataView
from icn.segments import data_content

log = logging.getLogger(__name__)

INITIAL_WINDOW = 4.0
REORDER = 3  # later arrivals that mark a batch lost
MIN_RTO = 0.05
MAX_RTO = 2.0
NACK_PAUSE = 0.05
MAX_NACK_PAUSE = 1.0
LOGGED_BAD = 5  # undecodable batches logged per input (all are counted)


class _Asked:
    __slots__ = ("later", "rec", "sent", "tries")

    def __init__(self, rec: PendingInterest, sent: float, tries: int) -> None:
        self.rec = rec
        self.sent = sent
        self.tries = tries
        self.later = 0


class Inlet:
    def __init__(
        self,
        ep: Endpoint,
        stream: bytes,
        reader: str,
        *,
        next_seq: int = 0,
        max_window: int = 32,
        lifetime_ms: int = 2000,
        counters: Counter[str],
    ) -> None:
        self.ep = ep
        self.stream = stream
        self.reader = reader
        self.max_window = max_window
        self.lifetime_ms = lifetime_ms
        self.counters = counters
        self.cwnd = min(INITIAL_WINDOW, float(max_window))
        self.next_deliver = next_seq
        self.next_ask = next_seq
        self.watermark = NO_WATERMARK
        self.ended = False
        self._end_seq: int | None = None
        self._asked: dict[int, _Asked] = {}
        self._retry: dict[int, float] = {}  # seq -> loop time to ask again (after a Nack)
        self._nack_pause = NACK_PAUSE
        self._bad: set[int] = set()  # batches that came back undecodable
        self._got: dict[int, Batch] = {}
        self._highest = next_seq - 1
        self._srtt: float | None = None
        self._rttvar = 0.0
        self._recover_until = 0.0
        self._wake = asyncio.Event()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._loop = asyncio.get_running_loop()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._pump())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for asked in self._asked.values():
            self.ep.drop(asked.rec)
        self._asked.clear()

    async def get(self) -> Batch:
        """The next batch in sequence (after the last one: a synthetic empty ended batch)."""
        while True:
            batch = self._got.pop(self.next_deliver, None)
            if batch is not None:
                self.next_deliver += 1
                self.watermark = max(self.watermark, batch.watermark)
                if batch.end:
                    self.ended = True
                    self._end_seq = self.next_deliver - 1
                self._wake.set()
                return batch
            if self.ended:
                return Batch(self.watermark, True, [])
            if self._error is not None:
                raise self._error
            self._ready.clear()
            await self._ready.wait()

    def report(self, consumed: int, durable: int) -> None:
        """Tell the producer how far this reader is (fire and forget: the next report
        supersedes a lost one)."""
        name = FlowNames.ack(self.stream, self.reader, consumed, durable)
        try:
            rec = self.ep.start(name, lifetime_ms=1000)
        except (TooManyPending, InterestNack):
            return
        rec.future.add_done_callback(partial(self._reported, rec))
        self.counters["reports"] += 1

    async def report_answered(self, consumed: int, durable: int, within: float) -> bool:
        """Report until the producer answers (the last report of a reader that is about to
        go: its producer waits for it before going too); False after ``within`` seconds."""
        name = FlowNames.ack(self.stream, self.reader, consumed, durable)
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        while (left := until - loop.time()) > 0:
            try:
                await self.ep.express(name, lifetime_ms=max(1, int(min(left, 0.5) * 1000)))
                return True
            except InterestTimeout:
                continue
            except (InterestNack, TooManyPending):
                await asyncio.sleep(min(0.05, max(0.0, until - loop.time())))
            except IcnError:  # the endpoint closed
                return False
        return False

    def _reported(self, rec: PendingInterest, fut: asyncio.Future[DataView]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            self.counters["reports_unanswered"] += 1
        self.ep.drop(rec)

    # ---- the window ---------------------------------------------------------------------------

    @property
    def rto(self) -> float:
        if self._srtt is None:
            return MAX_RTO
        return min(MAX_RTO, max(MIN_RTO, self._srtt + 4 * self._rttvar))

    async def _pump(self) -> None:
        try:
            while True:
                self._wake.clear()
                now = self._loop.time()
                self._ask_again_lost(now)
                self._ask_new(now)
                delay = self._next_check(now)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a bug: hand it to the reader rather than hang it
            log.exception("inlet %s failed", to_uri(self.stream))
            self._error = exc
            self._ready.set()

    def _ask_new(self, now: float) -> None:
        limit = self.next_deliver + self.max_window  # the reorder buffer is bounded too
        if self._end_seq is not None:
            limit = min(limit, self._end_seq + 1)
        for seq, when in list(self._retry.items()):
            if when <= now and len(self._asked) < self.cwnd:
                del self._retry[seq]
                self._ask(seq, now, tries=1)
        while self.next_ask < limit and len(self._asked) + len(self._retry) < int(self.cwnd):
            self._ask(self.next_ask, now, tries=0)
            self.next_ask += 1

    def _ask(self, seq: int, now: float, tries: int) -> None:
        try:
            rec = self.ep.start(
                FlowNames.batch(self.stream, seq),
                lifetime_ms=self.lifetime_ms,
                must_be_fresh=seq in self._bad,  # past caches that may hold the bad copy
            )
        except TooManyPending:
            self._retry[seq] = now + NACK_PAUSE
            return
        self._asked[seq] = _Asked(rec, now, tries + 1)
        rec.future.add_done_callback(partial(self._done, seq, rec))
        self.counters["interests"] += 1
        if tries:
            self.counters["interests_retransmitted"] += 1

    def _ask_again_lost(self, now: float) -> None:
        rto = self.rto
        for seq, asked in list(self._asked.items()):
            if asked.later >= REORDER or (seq < self._highest and now - asked.sent > rto):
                self.counters["losses"] += 1
                self._shrink(now)
                self.ep.drop(asked.rec)
                del self._asked[seq]
                self._ask(seq, now, asked.tries)

    def _next_check(self, now: float) -> float:
        waits = [when - now for when in self._retry.values()]
        if any(seq < self._highest for seq in self._asked):
            waits.append(self.rto / 4)
        return max(0.001, min(waits, default=1.0))

    def _shrink(self, now: float) -> None:
        if now >= self._recover_until:
            self.cwnd = max(1.0, self.cwnd / 2)
            self._recover_until = now + (self._srtt or MIN_RTO)
            self.counters["window_decreases"] += 1

    def _done(self, seq: int, rec: PendingInterest, fut: asyncio.Future[DataView]) -> None:
        if fut.cancelled():
            return
        # taken even when the answer is no longer wanted (an Interest past the end timed out
        # just before the last batch came): else asyncio logs it as never retrieved
        exc = fut.exception()
        asked = self._asked.get(seq)
        if asked is None or asked.rec is not rec:
            return  # dropped: asked again already
        del self._asked[seq]
        self.ep.drop(rec)
        now = self._loop.time()
        if isinstance(exc, InterestTimeout):
            self.counters["timeouts"] += 1
            if seq < self._highest:
                self.counters["losses"] += 1
                self._shrink(now)
            self._ask(seq, now, asked.tries)
        elif isinstance(exc, InterestNack):
            self.counters["nacks"] += 1
            self._retry[seq] = now + self._nack_pause
            self._nack_pause = min(self._nack_pause * 2, MAX_NACK_PAUSE)
        elif exc is not None:
            self._error = exc
            self._ready.set()
        else:
            self._arrived(seq, asked, fut.result(), now)
        self._wake.set()

    def _arrived(self, seq: int, asked: _Asked, dv: DataView, now: float) -> None:
        try:
            batch = decode_batch(data_content(dv))
        except StreamError as exc:
            # bad input from the network is dropped and counted, never raised: asked again
            # after a pause that doubles, with MustBeFresh (batches carry no freshness period,
            # so no content store answers: the producer does)
            self.counters["drop_bad_batch"] += 1
            if self.counters["drop_bad_batch"] <= LOGGED_BAD:
                log.warning("%s: %s", to_uri(FlowNames.batch(self.stream, seq)), exc)
            self._bad.add(seq)
            self._retry[seq] = now + self._nack_pause
            self._nack_pause = min(self._nack_pause * 2, MAX_NACK_PAUSE)
            return
        self._bad.discard(seq)
        self._nack_pause = NACK_PAUSE
        if asked.tries == 1:  # Karn: no sample from a batch asked for twice
            sample = now - asked.sent
            if self._srtt is None:
                self._srtt, self._rttvar = sample, sample / 2
            else:
                self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - sample)
                self._srtt = 0.875 * self._srtt + 0.125 * sample
        if getattr(asked.rec, "congestion_mark", 0):
            self.counters["congestion_marks"] += 1
            self._shrink(now)
        else:
            self.cwnd = min(float(self.max_window), self.cwnd + 1.0 / self.cwnd)
        if seq >= self.next_deliver and seq not in self._got:
            self._got[seq] = batch
            self.counters["batches_in"] += 1
            self.counters["records_in"] += len(batch.records)
        if seq > self._highest:
            for other, waiting in self._asked.items():
                if other < seq:
                    waiting.later += 1
            self._highest = seq
        if batch.end:
            self._end_seq = seq if self._end_seq is None else min(self._end_seq, seq)
            for other in [s for s in self._asked if s > seq]:
                self.ep.drop(self._asked.pop(other).rec)
            self.next_ask = min(self.next_ask, seq + 1)
        if seq == self.next_deliver:
            self._ready.set()
