"""asf (NFD's ``AsfStrategy``, Adaptive Smoothed-RTT-based Forwarding), with request cloning.

For each prefix (FIB entry) the strategy measures every next hop from the PIT's out-records:
Data back on an out-record's face gives an RTT sample (now minus the out-record's send time, not
taken from a hop the Interest went to twice: Karn), and an entry that expires with the
out-record unanswered, or a Nack from the hop, is a failure.  A new Interest goes to the best
hop: the lowest smoothed RTT among hops that answer, else a hop never measured, else (nothing
else left) a failed one; the FIB cost breaks ties.  At most once per ``probing-interval`` per
prefix a copy of a real Interest probes another hop, the one probed longest ago, so a hop that
got faster, a new route, or a failed hop whose back-off is over gets measured again.  A Nack
from a hop sends the Interest on to another hop not tried yet (NFD waits for the consumer to
retransmit); ``max-timeouts`` failures in a row mark a hop failed: it is ranked last and not
probed for a back-off that doubles per further failure (from the probing interval, at most
30 s or the interval), until it answers again.  A Nack of reason Congestion is no failure: the
hop is alive and busy (a RICE server with as many calls running as it takes), so the Interest
goes on to another hop and the next ones avoid it for a short hold (its smoothed RTT, doubling
per Congestion Nack in a row, at most the probing interval; :mod:`forwarder.fw.nexthop_stats`).

Probes and clones copy an Interest, so its producer may answer it twice: harmless for data,
wrong for a call that changes something.  ``probe~divert`` makes a probe take the Interest to
the probed hop instead of copying it (and a retransmission go back to the hop that has it), so
no Interest of the prefix is ever sent to two upstreams at once; RICE servers' prefixes use it,
and their idempotent functions' calls, which may run twice, come under ``<prefix>/_idem`` where
cloning is configured (docs/guides/strategies.md, "Replicas").

Request cloning (``clone-after``): an Interest not answered within that time is sent once more,
to the best hop it has not been sent to; the first Data satisfies the PIT entry and the other
one arrives late and is dropped, counted as "fw.clone_late_data" (and measures its hop).  The
timer is one heap per instance, run by the forwarder's periodic tick (so a clone leaves within
one tick period after its time, 20 ms by default), never a task per Interest.
``clone-after~pNN`` sets the time per Interest instead: the NN-th percentile (nearest rank) of
the last 64 RTT samples of the hop it was sent to (late answers included: they are the tail),
read when it is sent; a hop with fewer than 8 samples gives its RTO instead (1 s before any
sample), so a new or rarely used hop is cloned from only when it is clearly late.

Parameters, NFD-style components after the version, e.g.
``/localhost/nfd/strategy/asf/v=5/probing-interval~500/clone-after~50``:

- ``probing-interval~MS``: time between probes of a prefix (default 1000; NFD's is 60000);
- ``max-timeouts~N``: failures in a row that mark a hop failed (default 1: move away at once);
- ``clone-after~MS``: clone Interests pending that long (default: never), or ``clone-after~pNN``
  (NN in 50..99): pending longer than that percentile of their hop's RTTs;
- ``measurements-limit~N``: prefixes measured at most, least recently used out (default 1024);
- ``probe~copy`` (default) or ``probe~divert``: a probe copies the Interest, or takes it (not
  with ``clone-after``, which copies).

State is bounded: the measurements (:mod:`forwarder.fw.nexthop_stats`; a prefix unused for
5 minutes is forgotten, as in NFD), the late upstreams (:mod:`forwarder.fw.late_answers`) and
the clone heap (one item per Interest of the last ``clone-after``), and with a percentile the
last 64 RTT samples per hop.  Per-Interest state lives in the PIT entry
(``strategy_info["asf"]``) and goes with it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from forwarder.fw.late_answers import LateAnswers, LateRecord
from forwarder.fw.nexthop_stats import (
    UNMEASURED,
    FailurePolicy,
    Measurements,
    Namespace,
    NextHopStats,
)
from forwarder.fw.retx_suppression import RetxDecision, RetxSuppressionExponential
from forwarder.fw.strategy import InterestContext, Strategy
from icn.errors import ConfigError
from icn.wire import tlv_types as T

if TYPE_CHECKING:
    from collections.abc import Sequence

    from forwarder.face_api import FaceLike
    from forwarder.fw.forwarder_base import ForwarderBase
    from forwarder.table.fib import NextHop
    from forwarder.table.pit import PitEntry
    from icn.wire.packet import DataView

# name: (default, minimum, maximum, example); None default: off
PARAMETERS: dict[str, tuple[int | None, int, int, int]] = {
    "probing-interval": (1000, 10, 3_600_000, 1000),
    "max-timeouts": (1, 1, 1000, 3),
    "clone-after": (None, 1, 3_600_000, 50),
    "measurements-limit": (1024, 1, 1_000_000, 1024),
}
CLONE_PERCENTILES = (50, 99)  # clone-after~pNN: NN in this range
RTT_WINDOW = 64  # samples per hop a percentile is taken from
PERCENTILE_MIN_SAMPLES = 8  # fewer: the hop's RTO stands in for the percentile
# name: the values it takes, the default first
CHOICES: dict[str, tuple[str, ...]] = {"probe": ("copy", "divert")}
MEASUREMENTS_LIFETIME = 300.0  # s: NFD's ASF keeps a prefix's measurements 5 minutes
BACKOFF_MAX = 30.0  # s, unless the probing interval is longer
LATE_MAX = 4096  # upstreams remembered after another answered, per instance
HOUSEKEEPING_PERIOD = 1.0  # s between sweeps of expired measurements and late records
CONGESTION_HOLD_MIN = 0.05  # s: the shortest hold after a Congestion Nack

_INFO = "asf"  # strategy_info key

# A next hop as the strategy weighs it: FIB cost, face, stats.
_Hop = tuple[int, "FaceLike", NextHopStats]


def _probe_order(hop: _Hop) -> tuple[float, int]:
    last = hop[2].last_probe
    return (-math.inf if last is None else last, hop[0])


class _EntryInfo:
    """What the strategy keeps in a PIT entry: its prefix's measurements, the latest Interest
    (what a clone or a fail-over sends), the face cloned to, and the faces sent to more than
    once (no RTT sample from those; None until there is one, as for most entries)."""

    __slots__ = ("clone", "ctx", "ns", "probe", "resent")

    def __init__(self, ns: Namespace, ctx: InterestContext) -> None:
        self.ns = ns
        self.ctx = ctx
        self.clone: int | None = None
        self.resent: set[int] | None = None
        # the face this Interest probed, if it was a probe; negated for a probe that was owed
        self.probe: int | None = None

    def sent_once(self, face_id: int) -> bool:
        return self.resent is None or face_id not in self.resent


class AsfStrategy(Strategy):
    name = "asf"
    version = 5

    def __init__(self, fw: ForwarderBase, parameters: Mapping[str, str] | None = None) -> None:
        super().__init__(fw, parameters)
        p = {key: PARAMETERS[key][0] for key in PARAMETERS}
        p.update(
            {
                k: int(v)
                for k, v in self.parameters.items()
                if k in PARAMETERS and k != "clone-after"
            }
        )
        probing = p["probing-interval"]
        assert probing is not None  # it has a default; mypy cannot see it
        self.probing_interval = probing / 1000.0
        # clone-after~MS (clone_after, seconds) or clone-after~pNN (clone_percentile), or neither
        clone = self.parameters.get("clone-after")
        self.clone_percentile = int(clone[1:]) if clone and clone[0] == "p" else None
        self.clone_after = None if clone is None or self.clone_percentile else int(clone) / 1000.0
        self._clone_basis = f"p{self.clone_percentile}"
        max_timeouts = p["max-timeouts"]
        limit = p["measurements-limit"]
        assert max_timeouts is not None and limit is not None
        self.divert = self.parameters.get("probe") == "divert"
        self.policy = FailurePolicy(
            max_timeouts,
            self.probing_interval,
            max(BACKOFF_MAX, self.probing_interval),
            congestion_hold_min=min(CONGESTION_HOLD_MIN, self.probing_interval),
            congestion_hold_max=self.probing_interval,
            rtt_memory=self.probing_interval,
        )
        self.measurements = Measurements(
            self.policy,
            limit,
            MEASUREMENTS_LIFETIME,
            self.counters,
            window=RTT_WINDOW if self.clone_percentile else 0,
        )
        self.late = LateAnswers(LATE_MAX, self.counters)
        self.retx = RetxSuppressionExponential()
        self._clones: list[tuple[float, int, PitEntry]] = []  # (when, seq, entry)
        self._seq = 0
        self._next_housekeeping = -math.inf

    @classmethod
    def check_parameters(cls, parameters: Mapping[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in parameters.items():
            choices = CHOICES.get(key)
            if choices is not None:
                if value not in choices:
                    raise ConfigError(
                        f"strategy asf: {key}~{value} must be one of "
                        + ", ".join(f"{key}~{c}" for c in choices)
                    )
                out[key] = value
                continue
            spec = PARAMETERS.get(key)
            if spec is None:
                raise ConfigError(
                    f"strategy asf has no parameter {key!r}; use "
                    + ", ".join(f"{k}~{v[3]}" for k, v in PARAMETERS.items())
                    + ", "
                    + ", ".join(f"{k}~{'|'.join(v)}" for k, v in CHOICES.items())
                )
            _, low, high, example = spec
            if key == "clone-after" and value[:1] == "p":
                digits = value[1:]
                pct = int(digits) if digits.isascii() and digits.isdecimal() else 0
                if CLONE_PERCENTILES[0] <= pct <= CLONE_PERCENTILES[1]:
                    out[key] = f"p{pct}"
                    continue
            else:
                try:
                    number = int(value)
                except ValueError:
                    number = low - 1
                if low <= number <= high:
                    out[key] = str(number)
                    continue
            fix = f", e.g. {key}~{example}"
            if key == "clone-after":
                lo, hi = CLONE_PERCENTILES
                fix = (
                    f" (ms), or p{lo}..p{hi} for that percentile of the RTTs of the hop the "
                    f"Interest went to; e.g. {key}~{example} or {key}~p95"
                )
            raise ConfigError(
                f"strategy asf: {key}~{value} must be an integer in {low}..{high}{fix}"
            )
        if out.get("probe") == "divert" and "clone-after" in out:
            raise ConfigError(
                "strategy asf: probe~divert keeps each Interest on one upstream and clone-after "
                "copies it to a second; choose one (cloning belongs on the prefix of the calls "
                "that may run twice, e.g. /svc/_idem)"
            )
        return out

    # -- triggers ------------------------------------------------------------------------------

    def after_receive_interest(self, entry: PitEntry, ctx: InterestContext) -> None:
        now = ctx.now
        decision = self.retx.decide_per_pit_entry(entry, now, ctx.joined)
        if decision is RetxDecision.SUPPRESS:
            self.counters["fw.retx_suppressed"] += 1
            return
        if decision is RetxDecision.JOINED:
            self.counters["fw.joined_pending"] += 1
            return
        fib_entry = self.fib_entry(entry)
        if fib_entry is None:
            self._no_route(entry, ctx, decision)
            return
        ns = self.measurements.get(fib_entry.prefix, now)
        hops = self._hops(ns, fib_entry.nexthops, ctx)
        if not hops:
            self._no_route(entry, ctx, decision)
            return
        info = entry.strategy_info.get(_INFO)
        if isinstance(info, _EntryInfo):
            info.ns, info.ctx = ns, ctx
        else:
            info = entry.strategy_info[_INFO] = _EntryInfo(ns, ctx)
            self.watch(entry)
        if decision is RetxDecision.NEW:
            if len(hops) == 1:
                best = hops[0]
            else:
                best = min(hops, key=lambda h: h[2].rank(h[0], now))
                # (nothing measured yet: the cheapest takes the call, there is nothing to compare)
                if self.divert and now >= ns.next_probe and best[2].rtt.srtt is not None:
                    target = self._probe_target(hops, best, now, ns, info)
                    if target is not None:  # the probe takes the Interest: sent once
                        best = target
            self._send(entry, best, ctx, info)
            if len(hops) > 1:
                if now >= ns.next_probe and not self.divert:
                    self._probe(entry, hops, best, ctx, info)
                delay = self.clone_after
                if delay is None and self.clone_percentile is not None:
                    delay = self.clone_delay(best[2])[0]
                if delay is not None:
                    self._seq = seq = self._seq + 1
                    heapq.heappush(self._clones, (now + delay, seq, entry))
            return
        # An allowed retransmission: the best hop not already waiting on this Interest (the
        # consumer's retry is a chance to try another), else the best.  With probe~divert, the
        # hop still waiting on it if any: another would get the Interest a second time.
        out_records = entry.out_records
        idle = []
        waiting = []
        for hop in hops:
            out = out_records.get(hop[1].face_id)
            if out is None or out.nack_reason is not None or out.expiry <= now:
                idle.append(hop)
            else:
                waiting.append(hop)
        choice = (waiting or hops) if self.divert else (idle or hops)
        self._send(entry, min(choice, key=lambda h: h[2].rank(h[0], now)), ctx, info)

    def _no_route(self, entry: PitEntry, ctx: InterestContext, decision: RetxDecision) -> None:
        self.no_upstream(entry, ctx, decision is RetxDecision.NEW)

    def after_receive_nack(self, entry: PitEntry, ingress_id: int, reason: int, now: float) -> None:
        info = entry.strategy_info.get(_INFO)
        if isinstance(info, _EntryInfo):
            # Duplicate says the Interest looped back through that hop, not that it failed;
            # Congestion that the hop is busy: held off a while, not failed (module docstring).
            if reason == T.NACK_CONGESTION:
                info.ns.stats(ingress_id).record_congestion(now)
                self.counters["fw.asf_congestion"] += 1
            elif reason != T.NACK_DUPLICATE:
                info.ns.stats(ingress_id).record_failure(now, nack=True)
            target = self._untried(entry, info, now)
            if target is not None:
                self.counters["fw.asf_failover"] += 1
                info.ctx.now = now
                self._send(entry, target, info.ctx, info)
                return
        self.process_nack(entry)

    def before_satisfy_interest(
        self, entry: PitEntry, ingress_id: int, now: float, data: DataView
    ) -> None:
        info = entry.strategy_info.get(_INFO)
        if not isinstance(info, _EntryInfo):
            return
        ns = info.ns
        out_records = entry.out_records
        out = out_records.get(ingress_id)
        if data.content_type == T.CONTENT_NACK:
            self._app_nack(info, ingress_id)
        elif out is not None and info.sent_once(ingress_id):
            ns.stats(ingress_id).record_rtt(now - out.last_sent, now)
        if info.clone == ingress_id:
            self.counters["fw.clone_won"] += 1
        late = self.late
        for face_id, other in out_records.items():
            if face_id == ingress_id or other.nack_reason is not None or other.expiry <= now:
                continue
            record = LateRecord(
                other.last_sent,
                other.expiry,
                ns.stats(face_id),
                clone=face_id == info.clone,
                measured=info.sent_once(face_id),
                can_be_prefix=entry.can_be_prefix,
            )
            late.add(entry.name, face_id, record)

    def on_interest_expired(self, entry: PitEntry, now: float) -> None:
        info = entry.strategy_info.get(_INFO)
        if not isinstance(info, _EntryInfo):
            return
        ns = info.ns
        for face_id, out in entry.out_records.items():
            if out.nack_reason is None:
                ns.stats(face_id).record_failure(now, nack=False)
                self.counters["fw.asf_timeout"] += 1

    def after_receive_unsolicited_data(self, face_id: int, data: DataView, now: float) -> bool:
        rec = self.late.pop(data, face_id, now)
        if rec is None:
            return False
        if rec.measured and data.content_type != T.CONTENT_NACK:
            rec.stats.record_rtt(now - rec.sent, now)
        self.counters["fw.asf_late_data"] += 1
        if rec.clone:
            self.counters["fw.clone_late_data"] += 1
        return True

    def tick(self, now: float) -> None:
        clones = self._clones
        while clones and clones[0][0] <= now:
            self._clone(heapq.heappop(clones)[2], now)
        if now >= self._next_housekeeping:
            self._next_housekeeping = now + HOUSEKEEPING_PERIOD
            self.measurements.expire(now)
            self.late.expire(now)

    # -- choices -------------------------------------------------------------------------------

    def _hops(self, ns: Namespace, nexthops: Sequence[NextHop], ctx: InterestContext) -> list[_Hop]:
        """The eligible next hops with their stats, in FIB order."""
        faces = self.faces
        known = ns.hops
        ingress_id = ctx.ingress.face_id
        nonlocal_ok = ctx.nonlocal_ok
        hops: list[_Hop] = []
        for nh in nexthops:
            face_id = nh.face_id
            face = faces.get(face_id)
            # InterestContext.is_eligible, inline: this runs for every hop of every Interest
            if face is not None and face_id != ingress_id and (nonlocal_ok or face.is_local):
                stats = known.get(face_id)
                hops.append((nh.cost, face, ns.stats(face_id) if stats is None else stats))
        if len(ns.hops) > len(nexthops):
            ns.keep_only(nh.face_id for nh in nexthops)
        return hops

    def best_face(self, ns: Namespace, nexthops: Sequence[NextHop], now: float) -> int | None:
        """The hop a new Interest would go to now (ignoring where it came from), for status;
        changes nothing."""
        ranked = []
        for nh in nexthops:
            if nh.face_id in self.faces:
                stats = ns.hops.get(nh.face_id)
                key = (UNMEASURED, 0.0, nh.cost) if stats is None else stats.rank(nh.cost, now)
                ranked.append((key, nh.face_id))
        return min(ranked)[1] if ranked else None

    def clone_delay(self, stats: NextHopStats) -> tuple[float, str]:
        """How long after its send an Interest sent to this hop is cloned (when cloning is on),
        and by what: "fixed" (clone-after~MS), "pNN" (that percentile of the hop's last RTT
        samples) or "rto" (a percentile, but too few samples yet: the hop's RTO)."""
        if self.clone_after is not None:
            return self.clone_after, "fixed"
        window = stats.window
        pct = self.clone_percentile
        if window is not None and pct is not None and len(window) >= PERCENTILE_MIN_SAMPLES:
            value = window.percentile(pct)
            if value is not None:  # (never, with samples)
                return value, self._clone_basis
        return stats.rtt.rto, "rto"

    def _send(self, entry: PitEntry, hop: _Hop, ctx: InterestContext, info: _EntryInfo) -> None:
        face = hop[1]
        if face.face_id in entry.out_records:
            if info.resent is None:
                info.resent = set()
            info.resent.add(face.face_id)
        self.send_interest(entry, face, ctx)

    def _probe(
        self,
        entry: PitEntry,
        hops: list[_Hop],
        best: _Hop,
        ctx: InterestContext,
        info: _EntryInfo,
    ) -> None:
        """Send a copy of this Interest to the hop :meth:`_probe_target` picks."""
        target = self._probe_target(hops, best, ctx.now, info.ns, info)
        if target is not None:
            self._send(entry, target, ctx, info)

    def _probe_target(
        self, hops: list[_Hop], best: _Hop, now: float, ns: Namespace, info: _EntryInfo
    ) -> _Hop | None:
        """The hop to probe now: one owed a probe (:meth:`_app_nack`), else the one probed
        longest ago (never probed first), skipping failed hops still backing off and congested
        ones; marked probed, and in ``info`` as this Interest's probe."""
        # (by face: a compiled build passes tuples by value, so `is` cannot tell them apart)
        candidates = [h for h in hops if h[1] is not best[1] and not h[2].backing_off(now)]
        if not candidates:
            return None
        owed, ns.owed_probe = ns.owed_probe, None
        target = None
        if owed is not None:
            target = next((h for h in candidates if h[1].face_id == owed), None)
            info.probe = -owed  # (face ids are positive)
        if target is None:
            target = min(candidates, key=_probe_order)
            info.probe = target[1].face_id
        ns.next_probe = now + self.probing_interval
        target[2].last_probe = now
        self.counters["fw.asf_probe"] += 1
        return target

    def _app_nack(self, info: _EntryInfo, face_id: int) -> None:
        """The hop answered with an application-level Nack (ContentType NACK: a RICE server
        without the caller's session says so at once, doing no work).  Its time says nothing of
        what the hop takes to serve, so it is no RTT sample: a probe of a replica with a
        session call measured that replica's "no such session" (a few ms, whatever its real
        call time), which made a slowed replica look the quickest.  A probe so answered is owed:
        the next Interest of the prefix probes that hop again (the caller's next call, such as
        its full exchange after "no such session"), once."""
        self.counters["fw.asf_app_nack"] += 1
        if info.probe == face_id:  # a probe (not itself an owed one, which is negated)
            info.ns.owed_probe = face_id
            info.ns.next_probe = -math.inf

    def _untried(self, entry: PitEntry, info: _EntryInfo, now: float) -> _Hop | None:
        """The best hop this Interest has not been sent to and that is not backing off, if a
        downstream still waits for it."""
        if not any(rec.expiry > now for rec in entry.in_records.values()):
            return None
        fib_entry = self.fib_entry(entry)
        if fib_entry is None:
            return None
        out_records = entry.out_records
        candidates = [
            hop
            for hop in self._hops(info.ns, fib_entry.nexthops, info.ctx)
            if hop[1].face_id not in out_records and not hop[2].backing_off(now)
        ]
        return min(candidates, key=lambda h: h[2].rank(h[0], now)) if candidates else None

    def _clone(self, entry: PitEntry, now: float) -> None:
        """``clone-after`` passed for ``entry``: race a copy on another hop, once."""
        if not entry.live or entry.satisfied:
            return
        info = entry.strategy_info.get(_INFO)
        if not isinstance(info, _EntryInfo) or info.clone is not None:
            return
        if not self.has_pending_out_records(entry, now):
            return  # every upstream Nacked or expired: nothing to race
        target = self._untried(entry, info, now)
        if target is None:
            self.counters["fw.clone_no_nexthop"] += 1
            return
        info.clone = target[1].face_id
        info.ctx.now = now
        self.counters["fw.clone"] += 1
        self._send(entry, target, info.ctx, info)
