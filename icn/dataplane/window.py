"""The congestion window of a consumer and its loss detection, free of I/O.

A :class:`Window` tracks the requests (keys: segment numbers, sequence numbers, names) a
consumer has in flight.  The caller reports what happened, each call with ``now``: ``sent``,
``arrived`` (with the Data's congestion mark), ``expired`` (the Interest's lifetime ended),
``nacked``; then asks :meth:`Window.due` what to do: which keys are lost and must be asked again
now, which paused keys may be asked again, and when to look next.  ``room`` says how many new
keys may go out.

- Window: slow start up to ``ssthresh``, then one more per window of arrivals (additive
  increase); a loss, a congestion mark or a Congestion Nack multiplies it by ``decrease``, at
  most once per round trip (the losses of one burst are one congestion event).
- Loss: a key is lost when ``reorder`` keys sent after it have arrived, or when it waited
  longer than the RTO (:mod:`icn.rtt`, which backs off on such a timeout).  With
  ``loss_needs_later_arrival`` (streams, held Interests) waiting is not a loss until something
  sent later arrived: the producer may simply not have made the Data yet.
- Nacks: the key pauses (it keeps its slot) for a period that doubles with each Nack of that
  key, up to a cap, and starts again from the first after any arrival (the path works again).
  Per key: a window of Interests Nacked at once (no route yet) pauses each the first period,
  not the whole window the capped one.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from icn.rtt import RttEstimator, RttOptions

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class WindowOptions:
    initial_window: float = 4.0
    max_window: float = 64.0
    min_window: float = 1.0
    initial_ssthresh: float = math.inf  # slow start below it; initial_window: none
    decrease: float = 0.5  # multiplicative decrease
    reorder: int = 3  # later arrivals that make a key lost; 0: never by reordering
    rto_loss: bool = True  # a key older than the RTO is lost (else only its expiry counts)
    loss_needs_later_arrival: bool = False
    loss_decreases: bool = True  # off: a loss is re-sent, only marks and Nacks shrink the window
    nack_pause: float = 0.05  # first pause after a Nack, seconds; doubles up to max_nack_pause
    max_nack_pause: float = 1.0
    rtt: RttOptions = field(default_factory=RttOptions)

    def __post_init__(self) -> None:
        if not 1 <= self.min_window <= self.initial_window <= self.max_window:
            raise ValueError("windows need 1 <= min_window <= initial_window <= max_window")
        if not 0 < self.decrease < 1:
            raise ValueError("the window decrease factor must be between 0 and 1")
        if not 0 < self.nack_pause <= self.max_nack_pause:
            raise ValueError("Nack pauses need 0 < nack_pause <= max_nack_pause")


class Due(NamedTuple, Generic[K]):
    """What :meth:`Window.due` decided."""

    lost: list[K]  # ask again now (each a loss, already counted in the window)
    resume: list[K]  # paused (Nack, expiry) keys to ask again now
    next_at: float | None  # when to call due() again, if nothing else happens first


class _Entry:
    __slots__ = ("later", "nack_epoch", "nacks", "order", "resume_at", "sent", "tries")

    def __init__(self) -> None:
        self.sent = 0.0
        self.order = 0  # send order: what "sent after it" means for reordering
        self.tries = 0
        self.later = 0  # arrivals of keys sent after this one, since it was sent
        self.resume_at: float | None = None  # paused until then; None: in flight
        self.nacks = 0  # pauses since the last arrival of any key
        self.nack_epoch = 0


class Window(Generic[K]):
    """One consumer's window over keys of type ``K`` (see the module docstring)."""

    def __init__(self, options: WindowOptions | None = None) -> None:
        self.options = o = options or WindowOptions()
        self.rtt = RttEstimator(o.rtt)
        self.cwnd = o.initial_window
        self.ssthresh = max(o.initial_ssthresh, o.initial_window)
        self.decreases = 0
        self.losses = 0
        self._entries: dict[K, _Entry] = {}
        self._order = 0
        self._highest_arrived = -1  # send order of the latest-sent key that arrived
        self._recovery_end = -math.inf
        self._epoch = 0  # arrivals so far: an entry's older Nack count is stale

    # ---- questions --------------------------------------------------------------------------

    @property
    def rto(self) -> float:
        return self.rtt.rto

    @property
    def in_flight(self) -> int:
        """Keys sent and not yet arrived or forgotten (paused ones included: they keep their
        slot, so a Nacked key never waits behind new ones)."""
        return len(self._entries)

    def room(self) -> int:
        """How many new keys may be sent now."""
        return max(0, int(self.cwnd) - len(self._entries))

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def in_flight_keys(self) -> list[K]:
        """The keys in flight (paused ones included), oldest send first."""
        return list(self._entries)

    def tries(self, key: K) -> int:
        """Transmissions of ``key`` so far (0 if unknown)."""
        entry = self._entries.get(key)
        return 0 if entry is None else entry.tries

    # ---- events -----------------------------------------------------------------------------

    def sent(self, key: K, now: float) -> float | None:
        """``key`` was (re)sent at ``now``.  Returns when it will be lost by timeout unless it
        arrives first (None: only an arrival elsewhere, its expiry or a Nack decides)."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        else:  # moved to the end: entries stay in send order
            del self._entries[key]
            self._entries[key] = entry
        self._order += 1
        entry.sent, entry.order, entry.later, entry.resume_at = now, self._order, 0, None
        entry.tries += 1
        o = self.options
        if o.rto_loss and not o.loss_needs_later_arrival:
            return now + self.rtt.rto
        return None  # with a later arrival needed: it is the latest sent, so none yet

    def arrived(self, key: K, now: float, *, marked: bool = False) -> float | None:
        """Data for ``key`` came at ``now`` (``marked``: it carried a congestion mark).
        Returns the time since its last send; None if ``key`` was not in flight (a late or
        duplicate answer: nothing changes)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        elapsed = now - entry.sent
        if entry.tries == 1:  # Karn's rule: a Data cannot be matched to one of several sends
            self.rtt.sample(elapsed)
        self._epoch += 1
        if marked:
            self._decrease(now)
        elif self.cwnd < self.ssthresh:
            self.cwnd = min(self.options.max_window, self.cwnd + 1.0)
        else:
            self.cwnd = min(self.options.max_window, self.cwnd + 1.0 / self.cwnd)
        if entry.order > self._highest_arrived:
            self._highest_arrived = entry.order
            if self.options.reorder:
                for other in self._entries.values():  # in send order: stop at the first later
                    if other.order > entry.order:
                        break
                    other.later += 1
        return elapsed

    def expired(self, key: K, now: float) -> bool:
        """The Interest for ``key`` outlived its lifetime.  The key is to be asked again
        (:meth:`due` lists it in ``resume``); True if this was a loss (the window shrank)."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        entry.resume_at = now
        if self.options.loss_needs_later_arrival and entry.order > self._highest_arrived:
            return False  # nothing sent later came either: not made yet, not lost
        self.losses += 1
        self.rtt.back_off()
        if self.options.loss_decreases:
            self._decrease(now)
        return True

    def nacked(self, key: K, now: float, *, congestion: bool = False) -> float:
        """A Nack came for ``key``: it pauses (a Congestion Nack also shrinks the window).
        Returns when it may be asked again."""
        if congestion:
            self._decrease(now)
        return self.pause(key, now)

    def pause(self, key: K, now: float) -> float:
        """Ask ``key`` again only after a pause, twice as long as its previous one since the
        last arrival (a Nack, an answer the caller rejected).  Returns when."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        if entry.nack_epoch != self._epoch:
            entry.nacks, entry.nack_epoch = 0, self._epoch
        o = self.options
        entry.resume_at = at = now + min(o.max_nack_pause, o.nack_pause * 2.0**entry.nacks)
        entry.nacks += 1
        return at

    def forget(self, key: K) -> None:
        """Stop tracking ``key`` (given up, or no longer wanted)."""
        self._entries.pop(key, None)

    # ---- decisions --------------------------------------------------------------------------

    def due(self, now: float) -> Due[K]:
        """Which keys to ask again now, and when to look next.  Lost keys are counted (and the
        window shrunk) here; the caller sends each (then :meth:`sent`) or forgets it."""
        o = self.options
        rto = self.rtt.rto
        lost: list[K] = []
        resume: list[K] = []
        next_at: float | None = None
        timed_out = False
        for key, entry in self._entries.items():
            at = entry.resume_at
            if at is not None:
                if at <= now:
                    resume.append(key)
                elif next_at is None or at < next_at:
                    next_at = at
                continue
            if o.reorder and entry.later >= o.reorder:
                lost.append(key)
                continue
            if not o.rto_loss or (
                o.loss_needs_later_arrival and entry.order > self._highest_arrived
            ):
                continue  # an arrival, an expiry or a Nack will say more
            at = entry.sent + rto
            if at <= now:
                lost.append(key)
                timed_out = True
            elif next_at is None or at < next_at:
                next_at = at
        if lost:
            self.losses += len(lost)
            if o.loss_decreases:
                self._decrease(now)
            if timed_out:
                self.rtt.back_off()
        return Due(lost, resume, next_at)

    def _decrease(self, now: float) -> None:
        if now < self._recovery_end:
            return  # one decrease per round trip
        o = self.options
        self.ssthresh = max(o.min_window, self.cwnd * o.decrease)
        self.cwnd = self.ssthresh
        self._recovery_end = now + (self.rtt.srtt or o.rtt.min_rto)
        self.decreases += 1
