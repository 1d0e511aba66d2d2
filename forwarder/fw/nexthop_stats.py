"""What the adaptive strategy (``asf``) knows about the next hops of each prefix.

Per prefix (a FIB entry's), per next hop: the smoothed RTT, its variation and the RTO they give
(RFC 6298, :class:`icn.rtt.RttEstimator`, the one estimator the project has),
timeouts, Nacks, the failures in a row since the hop last answered, when it was last probed,
when a failed hop may be probed again, and until when a hop that said it is overloaded (a Nack
of reason Congestion) is left alone.  Sans-IO: times are seconds of the forwarder's clock,
passed in.

A Congestion Nack is not a failure: the hop answered, it is alive, it is busy (a RICE server
with as many calls running as it takes).  It is *congested* for a hold that starts at its
smoothed RTT (at least ``congestion_hold_min``, so about one call's time) and doubles per
Congestion Nack in a row, at most ``congestion_hold_max``; meanwhile new Interests prefer any
hop that answers or was never measured, and it is neither probed nor cloned to.  Its RTT and
failures are untouched, so once the hold ends it ranks by its RTT again.

For ``clone-after~pNN`` a hop also keeps its last ``window`` RTT samples
(:class:`forwarder.fw.rtt_window.RttWindow`); other prefixes keep none and pay nothing for it.

Bounded twice, as every table of the forwarder: at most ``max_prefixes`` prefixes (least
recently used out), and a prefix unused for ``lifetime`` seconds is forgotten.  A prefix keeps
stats only for faces that are its next hops (the strategy prunes the others), so faces that come
and go (app faces, on-demand UDP peers) do not pile up.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from forwarder.fw.rtt_window import RttWindow
from icn.rtt import RttEstimator, RttOptions

# Rank classes: a hop that answers is preferred to one never measured, both to one that is busy
# (Congestion Nack), and all three to one failing.
WORKING, UNMEASURED, CONGESTED, FAILED = 0, 1, 2, 3
STATUS_NAMES = ("working", "unmeasured", "congested", "failed")

_RTT_OPTIONS = RttOptions()


@dataclass(frozen=True)
class FailurePolicy:
    """When a hop counts as failed and how long it waits before it is probed again.

    ``max_failures`` timeouts or Nacks in a row mark it failed; it is then not probed for
    ``backoff_initial`` seconds, doubled by every further failure, at most ``backoff_max``.
    A Congestion Nack holds it off for its smoothed RTT (at least ``congestion_hold_min``),
    doubled by each further one in a row, at most ``congestion_hold_max``.
    """

    max_failures: int = 1
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    congestion_hold_min: float = 0.05
    congestion_hold_max: float = 1.0
    # the time constant of a hop's smoothed RTT (the probing interval): see record_rtt
    rtt_memory: float = 1.0

    def __post_init__(self) -> None:
        if self.max_failures < 1 or not 0 < self.backoff_initial <= self.backoff_max:
            raise ValueError("need max_failures >= 1 and 0 < backoff_initial <= backoff_max")
        if not 0 < self.congestion_hold_min <= self.congestion_hold_max:
            raise ValueError("need 0 < congestion_hold_min <= congestion_hold_max")
        if self.rtt_memory <= 0:
            raise ValueError("need rtt_memory > 0")


class NextHopStats:
    """One next hop of one prefix."""

    __slots__ = ("congested_until", "congestion", "congestion_nacks", "face_id", "failures",
                 "last_probe", "last_sample", "nacks", "policy", "retry_at", "rtt", "timeouts",
                 "window")  # fmt: skip

    def __init__(self, face_id: int, policy: FailurePolicy, window: int = 0) -> None:
        self.face_id = face_id
        self.policy = policy
        self.rtt = RttEstimator(_RTT_OPTIONS)
        # the last ``window`` samples, only where a percentile of them is used
        self.window = RttWindow(window) if window else None
        self.timeouts = 0
        self.nacks = 0  # Nacks that count as failures (NoRoute, no reason)
        self.failures = 0  # timeouts and Nacks in a row, since the hop last answered
        self.retry_at = -math.inf  # a failed hop is not probed before this
        self.last_probe: float | None = None
        self.last_sample = -math.inf  # when the last RTT sample came
        self.congestion_nacks = 0
        self.congestion = 0  # Congestion Nacks in a row, since the hop last answered
        self.congested_until = -math.inf

    @property
    def srtt(self) -> float | None:
        return self.rtt.srtt

    @property
    def failed(self) -> bool:
        return self.failures >= self.policy.max_failures

    def backing_off(self, now: float) -> bool:
        """Failed and its back-off not over, or congested and its hold not over: neither
        probed nor cloned to."""
        if self.failures >= self.policy.max_failures:
            return now < self.retry_at
        return now < self.congested_until

    def status(self, now: float) -> int:
        if self.failures >= self.policy.max_failures:
            return FAILED
        if now < self.congested_until:
            return CONGESTED
        return UNMEASURED if self.rtt.srtt is None else WORKING

    def rank(self, cost: int, now: float) -> tuple[int, float, int]:
        """Sort key, lowest best: working hops by smoothed RTT, then hops never measured, then
        congested ones by the end of their hold, then failed ones by the end of their back-off;
        the FIB cost breaks ties."""
        if self.failures >= self.policy.max_failures:
            return (FAILED, self.retry_at, cost)
        if now < self.congested_until:
            return (CONGESTED, self.congested_until, cost)
        srtt = self.rtt.srtt
        if srtt is None:
            return (UNMEASURED, 0.0, cost)
        return (WORKING, srtt, cost)

    def record_rtt(self, rtt: float, now: float) -> None:
        """The hop answered after ``rtt`` seconds (at ``now``): a sample, and it is working
        again.

        The smoothed RTT forgets with time, not only with samples.  RFC 6298 weighs every sample
        1/8, which suits the hop that takes the Interests (a sample every few milliseconds, so
        the estimate spans its last eight or so answers); but a hop measured only by probes gets
        one sample per probing interval or less, and one slow first answer (a cold server's
        first call, a moment of load) then outweighed its quick later ones for many seconds:
        the nearest replica of the replicas scenario stayed behind a slower one for about
        fifteen probes (issue 34).  So a sample's weight is at least RFC 6298's 1/8 and at
        least ``1 - exp(-gap / rtt_memory)``, ``gap`` being the time since the hop's previous
        sample and ``rtt_memory`` the probing interval: after an interval without samples the
        new one counts 63%, after two 86%."""
        gap = now - self.last_sample
        self.last_sample = now
        memory = self.policy.rtt_memory
        if gap <= memory * _RTT_OPTIONS.alpha:  # the usual case, a busy hop: RFC 6298's gain
            self.rtt.sample(rtt)
        else:
            self.rtt.sample(rtt, max(_RTT_OPTIONS.alpha, 1.0 - math.exp(-gap / memory)))
        if self.window is not None:
            self.window.add(rtt)
        self.failures = 0
        self.retry_at = -math.inf
        self.congestion = 0

    def record_congestion(self, now: float) -> None:
        """A Nack of reason Congestion: the hop is busy, not failing.  Held off for its smoothed
        RTT (at least the policy's minimum), twice as long for each further one in a row."""
        self.congestion_nacks += 1
        policy = self.policy
        hold = max(policy.congestion_hold_min, self.rtt.srtt or 0.0)
        hold *= 2.0 ** min(self.congestion, 30)
        self.congestion += 1
        self.congested_until = now + min(policy.congestion_hold_max, hold)

    def record_failure(self, now: float, *, nack: bool) -> None:
        """A timeout (or a Nack): one more failure in a row; at the policy's count the hop is
        failed and backs off, twice as long for each failure beyond it."""
        if nack:
            self.nacks += 1
        else:
            self.timeouts += 1
            self.rtt.back_off()
        self.failures += 1
        policy = self.policy
        beyond = self.failures - policy.max_failures
        if beyond >= 0:
            wait = policy.backoff_initial * (2.0 ** min(beyond, 30))
            self.retry_at = now + min(policy.backoff_max, wait)


class Namespace:
    """The measurements of one prefix: its hops' stats and when it may be probed next (with
    ``window``, each hop keeps its last that many RTT samples)."""

    __slots__ = ("hops", "last_used", "next_probe", "owed_probe", "policy", "prefix", "window")

    def __init__(self, prefix: bytes, policy: FailurePolicy, now: float, window: int = 0) -> None:
        self.prefix = prefix
        self.policy = policy
        self.window = window
        self.hops: dict[int, NextHopStats] = {}
        self.next_probe = -math.inf
        # a face whose probe got an application-level Nack and is probed again by the next
        # Interest; negated once that next probe has gone (so it is owed only once); see asf
        self.owed_probe: int | None = None
        self.last_used = now

    def stats(self, face_id: int) -> NextHopStats:
        hop = self.hops.get(face_id)
        if hop is None:
            hop = self.hops[face_id] = NextHopStats(face_id, self.policy, self.window)
        return hop

    def keep_only(self, face_ids: Iterable[int]) -> None:
        """Forget the hops that are no longer next hops of the prefix."""
        keep = set(face_ids)
        for face_id in [f for f in self.hops if f not in keep]:
            del self.hops[face_id]


class Measurements:
    """Prefix -> :class:`Namespace`, at most ``max_prefixes`` (least recently used out, counted
    as "fw.asf_evicted"), each forgotten ``lifetime`` seconds after its last use
    ("fw.asf_expired"); with ``window``, each hop keeps its last that many RTT samples."""

    __slots__ = ("_counters", "_table", "lifetime", "max_prefixes", "policy", "window")

    def __init__(
        self,
        policy: FailurePolicy,
        max_prefixes: int,
        lifetime: float,
        counters: Counter[str] | None = None,
        window: int = 0,
    ) -> None:
        if max_prefixes < 1 or lifetime <= 0:
            raise ValueError("need max_prefixes >= 1 and lifetime > 0")
        self.policy = policy
        self.max_prefixes = max_prefixes
        self.lifetime = lifetime
        self.window = window
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._table: OrderedDict[bytes, Namespace] = OrderedDict()

    def get(self, prefix: bytes, now: float) -> Namespace:
        """The measurements of ``prefix``, made if new, marked used now."""
        table = self._table
        ns = table.get(prefix)
        if ns is None:
            ns = table[prefix] = Namespace(prefix, self.policy, now, self.window)
            if len(table) > self.max_prefixes:
                table.popitem(last=False)
                self._counters["fw.asf_evicted"] += 1
        else:
            table.move_to_end(prefix)
            ns.last_used = now
        return ns

    def find(self, prefix: bytes) -> Namespace | None:
        """The measurements of ``prefix`` if any, without marking them used."""
        return self._table.get(prefix)

    def expire(self, now: float) -> int:
        """Forget the prefixes unused for ``lifetime``; return how many.  The table is in order
        of last use, so only the expired ones at its front are looked at."""
        table = self._table
        cutoff = now - self.lifetime
        n = 0
        while table:
            ns = next(iter(table.values()))
            if ns.last_used > cutoff:
                break
            table.popitem(last=False)
            n += 1
        if n:
            self._counters["fw.asf_expired"] += n
        return n

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[Namespace]:
        """Namespaces in canonical prefix order, for the status dataset."""
        table = self._table
        return iter([table[p] for p in sorted(table)])
