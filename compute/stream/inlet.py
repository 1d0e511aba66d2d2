"""The reader side of one stream: batches pulled in sequence through the one fetcher
(:mod:`icn.dataplane.fetcher`), handed over in order, each once.

The stream's policy: the window grows by one per window of batches received (no slow start)
and halves, at most once per round trip, when a batch is found lost or comes back with a
congestion mark.  A batch counts as lost when three asked after it arrived first (then it is
asked again at once), or when it waited longer than the retransmission timeout while a later
one arrived.  An Interest that expires while nothing asked later has come is not a loss: the
producer has not produced it yet, so it is asked again without shrinking the window.  A Nack
(no route yet: the producer is starting) is retried after a pause that doubles.  What the
inlet keeps: the order of hand-over, a reorder buffer bounded by the window, the end of the
stream, and what an undecodable batch means (dropped, counted, asked again past caches).
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
from icn.dataplane.endpoint import Endpoint, PendingInterest
from icn.dataplane.fetcher import Fetcher, FetchPolicy, fetch
from icn.dataplane.segments import data_content
from icn.errors import IcnError, InterestNack, InterestTimeout, TooManyPending
from icn.rtt import RttOptions
from icn.wire.name import to_uri
from icn.wire.packet import DataView

log = logging.getLogger(__name__)

INITIAL_WINDOW = 4.0
LOGGED_BAD = 5  # undecodable batches logged per input (all are counted)


def stream_policy(max_window: int, lifetime_ms: int) -> FetchPolicy:
    """The stream's fetch policy (module docstring)."""
    return FetchPolicy(
        lifetime_ms=lifetime_ms,
        max_retries=None,
        loss_needs_later_arrival=True,
        reorder=3,
        initial_window=min(INITIAL_WINDOW, float(max_window)),
        max_window=float(max_window),
        slow_start=False,
        rtt=RttOptions(initial_rto=2.0, min_rto=0.05, max_rto=2.0),
    )


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
        self.next_deliver = next_seq
        self.next_ask = next_seq
        self.watermark = NO_WATERMARK
        self.ended = False
        self._end_seq: int | None = None
        self._got: dict[int, Batch] = {}
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self.fetcher: Fetcher[int] = Fetcher(
            ep,
            stream_policy(max_window, lifetime_ms),
            partial(FlowNames.batch, stream),
            self._next_seq,
            self._arrived,
            counters=counters,
        )

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.fetcher.finish()  # drops what it still asks for

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
                self.fetcher.pump()  # room in the reorder buffer: ask further
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
            # MustBeFresh: a content store keeps the answer to the same report sent before,
            # and a restarted producer (positions from its checkpoint, behind this) would
            # never hear it again; the answers are never fresh (FreshnessPeriod 0)
            rec = self.ep.start(name, lifetime_ms=1000, must_be_fresh=True)
        except (TooManyPending, InterestNack):
            return
        rec.future.add_done_callback(partial(self._reported, rec))
        self.counters["reports"] += 1

    async def report_answered(self, consumed: int, durable: int, within: float) -> bool:
        """Report until the producer answers (the last report of a reader that is about to
        go: its producer waits for it before going too); False after ``within`` seconds."""
        name = FlowNames.ack(self.stream, self.reader, consumed, durable)
        policy = FetchPolicy(
            lifetime_ms=max(1, int(min(within, 0.5) * 1000)),
            must_be_fresh=True,  # as report(): the producer must hear it, not a cache
            deadline=within,
            max_retries=None,
            rto_retransmit=False,
        )
        try:
            await fetch(self.ep, name, policy)
            return True
        except InterestTimeout:
            return False
        except IcnError:  # the endpoint closed
            return False

    def _reported(self, rec: PendingInterest, fut: asyncio.Future[DataView]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            self.counters["reports_unanswered"] += 1
        self.ep.drop(rec)

    # ---- what the fetcher asks and hands over --------------------------------------------------

    async def _run(self) -> None:
        try:
            await self.fetcher.run()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the endpoint closed, or a bug: hand it to the reader
            if not isinstance(exc, IcnError):
                log.exception("inlet %s failed", to_uri(self.stream))
            self._error = exc
            self._ready.set()

    def _next_seq(self) -> int | None:
        limit = self.next_deliver + self.max_window  # the reorder buffer is bounded too
        if self._end_seq is not None:
            limit = min(limit, self._end_seq + 1)
        if self.next_ask >= limit:
            return None
        self.next_ask += 1
        return self.next_ask - 1

    def _arrived(self, seq: int, dv: DataView) -> bool:
        try:
            batch = decode_batch(data_content(dv))
        except StreamError as exc:
            # bad input from the network is dropped and counted, never raised: the fetcher
            # asks again after a pause, with MustBeFresh (batches carry no freshness period,
            # so no content store answers: the producer does)
            self.counters["drop_bad_batch"] += 1
            if self.counters["drop_bad_batch"] <= LOGGED_BAD:
                log.warning("%s: %s", to_uri(FlowNames.batch(self.stream, seq)), exc)
            return False
        if seq >= self.next_deliver and seq not in self._got:
            self._got[seq] = batch
            self.counters["batches_in"] += 1
            self.counters["records_in"] += len(batch)
        if batch.end:
            self._end_seq = seq if self._end_seq is None else min(self._end_seq, seq)
            for other in self.fetcher.window.in_flight_keys():
                if other > seq:
                    self.fetcher.cancel(other)
            self.next_ask = min(self.next_ask, seq + 1)
        if seq == self.next_deliver:
            self._ready.set()
        return True
