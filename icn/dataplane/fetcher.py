"""The one fetcher: keys asked for by name over an :class:`~icn.dataplane.endpoint.Endpoint`, as
many in
flight as the flow-control core (:mod:`icn.dataplane.window`) allows.

The asyncio layer only: it sends what the core says, reports to it what came back (Data, its
congestion mark, an expiry, a Nack) with the loop's time, and keeps one timer at the time the
core names.  What a caller wants differs by a :class:`FetchPolicy` (deadline, retries, whether
an expiry before any later arrival is a loss, lifetime, windows, Nacks), never by a loop of its
own.  :func:`fetch` gets one name, :func:`fetch_all` a list of names; a segmented object
(:func:`icn.dataplane.segments.fetch_segments`) and a stream of sequenced names (the stream inlet)
drive a
:class:`Fetcher` with a source of keys that grows as they learn more.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from icn.dataplane.window import Window, WindowOptions
from icn.errors import InterestNack, InterestTimeout, TooManyPending
from icn.rtt import RttOptions
from icn.wire import tlv_types as T
from icn.wire.name import to_uri
from icn.wire.packet import DataView

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint, PendingInterest

K = TypeVar("K", bound=Hashable)

Verifier = Callable[[DataView], None]


@dataclass(frozen=True)
class FetchPolicy:
    """How one caller fetches.

    ``max_retries``: re-sends per key (after a loss, an expiry or a Nack) before InterestTimeout;
    None: until the deadline.  ``deadline``: seconds for the whole fetch (None: no bound).
    ``rto_retransmit``: re-send once the RTO passes (before the Interest's lifetime ends); off,
    only an expiry re-sends (a call whose answer takes long to compute).
    ``loss_needs_later_arrival``: an Interest that waits, or expires, while nothing asked after
    it has come is not lost (the producer has not made the Data yet: streams, held chunks); it
    is asked again without shrinking the window.  ``loss_decreases`` off: losses are re-sent
    but only congestion marks and Congestion Nacks shrink the window.  ``nack_gives_up``: a
    Nack fails the fetch (else the key pauses, the pause doubling, and is asked again).
    """

    lifetime_ms: int = T.DEFAULT_INTEREST_LIFETIME_MS
    deadline: float | None = None
    max_retries: int | None = 2
    rto_retransmit: bool = True
    loss_needs_later_arrival: bool = False
    loss_decreases: bool = True
    nack_gives_up: bool = False
    must_be_fresh: bool = False
    initial_window: float = 4.0
    max_window: float = 64.0
    slow_start: bool = True
    reorder: int = 3
    rtt: RttOptions = field(default_factory=RttOptions)

    @cached_property
    def window_options(self) -> WindowOptions:
        return WindowOptions(
            initial_window=self.initial_window,
            max_window=self.max_window,
            initial_ssthresh=self.max_window if self.slow_start else self.initial_window,
            reorder=self.reorder,
            rto_loss=self.rto_retransmit,
            loss_needs_later_arrival=self.loss_needs_later_arrival,
            loss_decreases=self.loss_decreases,
            rtt=self.rtt,
        )


@lru_cache(maxsize=256)
def expiry_policy(lifetime_ms: int, deadline: float | None, retries: int) -> FetchPolicy:
    """Ask again only when the lifetime ends, ``retries`` times, a Nack final: what
    :meth:`Endpoint.express` promises (the answer may take long to compute: a call, a Trigger
    Interest).  Cached: a call's expressions share a few of these."""
    return FetchPolicy(
        lifetime_ms=lifetime_ms,
        deadline=deadline,
        max_retries=retries,
        rto_retransmit=False,
        nack_gives_up=True,
    )


class Fetcher(Generic[K]):
    """Asks for keys (``name_of(key)``) until :meth:`finish` or a failure.

    ``next_key()`` gives the next key to ask for when the window has room (None: nothing now;
    call :meth:`pump` when there is).  ``on_data(key, data)`` takes each answer once; returning
    False rejects it (a bad payload): the key is asked again after a pause, past caches.
    ``interest`` holds more :meth:`Endpoint.start` arguments (CanBePrefix, parameters...).
    """

    def __init__(
        self,
        ep: Endpoint,
        policy: FetchPolicy,
        name_of: Callable[[K], bytes],
        next_key: Callable[[], K | None],
        on_data: Callable[[K, DataView], bool | None],
        *,
        counters: Counter[str] | None = None,
        verify: Verifier | None = None,
        interest: dict[str, Any] | None = None,
    ) -> None:
        self.ep = ep
        self.policy = policy
        self.window: Window[K] = Window(policy.window_options)
        self.counters: Counter[str] = Counter() if counters is None else counters
        self._name_of = name_of
        self._next_key = next_key
        self._on_data = on_data
        self._verify = verify
        self._interest = dict(interest or {})
        self._fresh_always = policy.must_be_fresh or bool(self._interest.pop("must_be_fresh", 0))
        self._recs: dict[K, PendingInterest] = {}
        self._fresh: set[K] = set()  # rejected once: asked again with MustBeFresh
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._decreases = 0

    @property
    def done(self) -> bool:
        return self._done.done()

    async def run(self) -> None:
        """Fetch until :meth:`finish`; raises what ended the fetch otherwise."""
        if self.policy.deadline is not None:
            self._deadline = self._loop.call_later(self.policy.deadline, self._too_late)
        try:
            self.pump()
            await self._done
        finally:
            self._close()

    def finish(self) -> None:
        if not self._done.done():
            self._done.set_result(None)
        self._close()

    def fail(self, exc: BaseException) -> None:
        if not self._done.done():
            self._done.set_exception(exc)
        self._close()

    def cancel(self, key: K) -> None:
        """``key`` is no longer wanted (past the end of an object or a stream)."""
        self.window.forget(key)
        rec = self._recs.pop(key, None)
        if rec is not None:
            self.ep.drop(rec)

    def pump(self) -> None:
        """Send what the core says is due, then new keys while the window has room."""
        if self._done.done():
            return
        now = self._loop.time()
        window = self.window
        due = window.due(now)
        next_at = due.next_at
        if due.lost:
            self.counters["losses"] += len(due.lost)
            self._note_decreases()
        for key in (*due.lost, *due.resume):
            at = self._ask(key, now)
            if at is not None and (next_at is None or at < next_at):
                next_at = at
        room = window.room()
        while room > 0 and not self._done.done():
            new = self._next_key()
            if new is None:
                break
            room -= 1
            at = self._ask(new, now)
            if at is not None and (next_at is None or at < next_at):
                next_at = at
        self._arm(next_at)

    # ---- inside -------------------------------------------------------------------------------

    def _ask(self, key: K, now: float) -> float | None:
        """Send ``key`` (again); returns when the core wants to look at it next, if ever."""
        window = self.window
        tries = window.tries(key)
        limit = self.policy.max_retries
        if limit is not None and tries > limit:
            self.fail(InterestTimeout(to_uri(self._name_of(key)), tries))
            return None
        old = self._recs.pop(key, None)
        if old is not None:  # lost by RTO or reordering while its Interest still waits
            self.ep.drop(old)
        try:
            rec = self.ep.start(
                self._name_of(key),
                lifetime_ms=self.policy.lifetime_ms,
                must_be_fresh=self._fresh_always or key in self._fresh,
                **self._interest,
            )
        except TooManyPending:
            return window.pause(key, now)
        except Exception as exc:  # the endpoint closed, a bad name: nothing more will come
            self.fail(exc)
            return None
        rec.verify = self._verify
        self._recs[key] = rec
        rec.future.add_done_callback(partial(self._answered, key, rec))
        self.counters["interests"] += 1
        if tries:
            self.counters["interests_retransmitted"] += 1
            self.ep.counters["retransmitted"] += 1
        return window.sent(key, now)

    def _answered(self, key: K, rec: PendingInterest, fut: asyncio.Future[DataView]) -> None:
        if fut.cancelled():
            return
        # taken even when no longer wanted, else asyncio logs it as never retrieved
        exc = fut.exception()
        if self._recs.get(key) is not rec:
            return  # asked again or cancelled since
        del self._recs[key]
        self.ep.drop(rec)
        now = self._loop.time()
        window = self.window
        if isinstance(exc, InterestTimeout):
            self.counters["timeouts"] += 1
            if window.expired(key, now):
                self.counters["losses"] += 1
        elif isinstance(exc, InterestNack):
            self.counters["nacks"] += 1
            if self.policy.nack_gives_up:
                self.fail(exc)
                return
            window.nacked(key, now, congestion=exc.reason == T.NACK_CONGESTION)
        elif exc is not None:  # a Data that failed verification, the endpoint closed
            self.fail(exc)
            return
        else:
            dv = fut.result()
            if window.tries(key) > 1:
                self.counters["bytes_after_retx"] += len(dv.wire)
            try:
                accepted = self._on_data(key, dv)
            except Exception as err:  # the caller's verdict on the content (too large...)
                self.fail(err)
                return
            if accepted is False:  # neither a round trip nor a success: paused, then fresh
                self._fresh.add(key)
                window.pause(key, now)
            else:
                self._fresh.discard(key)
                marked = rec.congestion_mark != 0
                window.arrived(key, now, marked=marked)
                if marked:
                    self.counters["congestion_marks"] += 1
        self._note_decreases()
        self.pump()

    def _note_decreases(self) -> None:
        n = self.window.decreases
        if n != self._decreases:
            self.counters["window_decreases"] += n - self._decreases
            self._decreases = n

    def _arm(self, at: float | None) -> None:
        # an earlier timer is left to fire (pump() then looks again): re-arming on every
        # arrival, as the oldest key's RTO moves later, cost a timer per Data
        if at is None or (self._timer_at is not None and self._timer_at <= at):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = self._timer_at = None
        self.pump()

    def _too_late(self) -> None:
        self._deadline = None
        oldest = next(iter(self._recs), None)
        if oldest is None:
            self.fail(InterestTimeout("(nothing pending)", 0, self.policy.deadline))
            return
        self.fail(
            InterestTimeout(
                to_uri(self._name_of(oldest)), self.window.tries(oldest), self.policy.deadline
            )
        )

    def _close(self) -> None:
        for timer in (self._timer, self._deadline):
            if timer is not None:
                timer.cancel()
        self._timer = self._deadline = None
        self._timer_at = None
        recs, self._recs = self._recs, {}
        for rec in recs.values():
            self.ep.drop(rec)


async def fetch(
    ep: Endpoint,
    name: bytes,
    policy: FetchPolicy,
    *,
    counters: Counter[str] | None = None,
    verify: Verifier | None = None,
    **interest: Any,
) -> DataView:
    """The Data answering ``name`` (an Interest built with ``interest``), asked again as
    ``policy`` says.  InterestTimeout, InterestNack (``nack_gives_up``), or what ``verify``
    raised.

    The same core and decisions as a :class:`Fetcher` of one key, as a coroutine that awaits
    its Interest directly: a Fetcher's callback hop made each call about 40 µs dearer, and
    one name is what every named-function call asks for."""
    loop = asyncio.get_running_loop()
    window: Window[int] = Window(policy.window_options)
    until = None if policy.deadline is None else loop.time() + policy.deadline
    limit = policy.max_retries
    while True:
        tries = window.tries(0)
        if limit is not None and tries > limit:
            raise InterestTimeout(to_uri(name), tries)
        now = loop.time()
        try:
            rec = ep.start(name, lifetime_ms=policy.lifetime_ms, **interest)
        except TooManyPending:
            await _pause(loop, window.pause(0, now), until, name, tries, policy)
            continue
        rec.verify = verify
        if tries:
            ep.counters["retransmitted"] += 1
            if counters is not None:
                counters["interests_retransmitted"] += 1
        lost_at = window.sent(0, now)
        wake = until if lost_at is None or (until is not None and until < lost_at) else lost_at
        try:
            if wake is None:
                dv = await rec.future
            else:
                async with asyncio.timeout_at(wake):
                    dv = await rec.future
        except TimeoutError:  # the RTO or the deadline, before the lifetime ended
            now = loop.time()
            if until is not None and now >= until:
                raise InterestTimeout(to_uri(name), tries + 1, policy.deadline) from None
            if window.due(now).lost and counters is not None:
                counters["losses"] += 1
            continue
        except InterestTimeout:
            window.expired(0, loop.time())
            if counters is not None:
                counters["timeouts"] += 1
            continue
        except InterestNack as exc:
            if counters is not None:
                counters["nacks"] += 1
            if policy.nack_gives_up:
                raise
            congestion = exc.reason == T.NACK_CONGESTION
            at = window.nacked(0, loop.time(), congestion=congestion)
            await _pause(loop, at, until, name, tries + 1, policy)
            continue
        finally:
            ep.drop(rec)
        if tries and counters is not None:
            counters["bytes_after_retx"] += len(dv.wire)
        return dv


async def _pause(
    loop: asyncio.AbstractEventLoop,
    at: float,
    until: float | None,
    name: bytes,
    tries: int,
    policy: FetchPolicy,
) -> None:
    if until is not None and at >= until:
        await asyncio.sleep(max(0.0, until - loop.time()))
        raise InterestTimeout(to_uri(name), tries, policy.deadline)
    await asyncio.sleep(max(0.0, at - loop.time()))


async def fetch_all(
    ep: Endpoint,
    names: Sequence[bytes],
    on_data: Callable[[int, DataView], object],
    policy: FetchPolicy,
    *,
    counters: Counter[str] | None = None,
) -> None:
    """Fetch every name, as many at once as the window allows; ``on_data(i, data)`` as each
    arrives (in any order)."""
    if not names:
        return
    left = len(names)
    nxt = 0

    def next_key() -> int | None:
        nonlocal nxt
        if nxt >= len(names):
            return None
        nxt += 1
        return nxt - 1

    def arrived(i: int, dv: DataView) -> None:
        nonlocal left
        on_data(i, dv)
        left -= 1
        if not left:
            fetcher.finish()

    fetcher: Fetcher[int] = Fetcher(
        ep, policy, names.__getitem__, next_key, arrived, counters=counters
    )
    await fetcher.run()
