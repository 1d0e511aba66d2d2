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

With a ``validator`` (opt-in; :mod:`compute.stream.validation`), each batch Data is handed over
only if the project's one validator accepts it: its signature type, its KeyLocator, the trust
schema (may that key sign that batch name?), the signature, and the signer's certificate chain
up to a trust anchor, each certificate valid now.  The check is made without I/O as the batch
arrives; a batch whose signer's chain is not cached yet starts one fetch of that chain (shared
by the inlets of that validator, a few at once) and is asked again after a pause (counted
``batches_awaiting_certificate``); once the chain is cached, the new copy passes.  A refused
batch (a stranger's key, a name the schema does not give its signer, a forged signature, an
expired certificate) is dropped, counted (``batches_refused``, and the validator's
``trust.refused_*`` say why), logged the first few times, never handed over, and asked again
past caches, so a forged copy in a content store does not block the real one.  Without a
validator, batches are taken as they come, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from functools import partial
from typing import TYPE_CHECKING

from compute.stream.batch import NO_WATERMARK, Batch, decode_batch
from compute.stream.errors import StreamError
from compute.stream.names import FlowNames
from compute.stream.validation import BatchCheck
from icn.dataplane.endpoint import Endpoint, PendingInterest
from icn.dataplane.fetcher import Fetcher, FetchPolicy, fetch
from icn.dataplane.segments import data_content
from icn.errors import IcnError, InterestNack, InterestTimeout, TooManyPending
from icn.rtt import RttOptions
from icn.wire.name import to_uri
from icn.wire.packet import DataView

if TYPE_CHECKING:
    from icn.security.trust import Validator

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
        validator: Validator | None = None,
    ) -> None:
        self.ep = ep
        self.stream = stream
        self.reader = reader
        self.max_window = max_window
        self.lifetime_ms = lifetime_ms
        self.counters = counters
        self.validator = validator
        self._check = None if validator is None else BatchCheck(validator, counters)
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
        if self._check is not None:
            self._check.close()

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
        if self._check is not None and not self._check.admits(dv):
            return False  # refused, or its signer's chain is on its way: asked again, fresh
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
