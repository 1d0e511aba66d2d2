"""The strategy interface: what a forwarding strategy is told, and the helpers it acts with.

Modelled on NFD's ``nfd::fw::Strategy``.  The forwarder runs the parts of the pipelines every
strategy shares (parsing, loop and scope checks, PIT and CS work) and calls a strategy at the two
points where forwarding is a choice: a new or retransmitted Interest needs upstreams, and a Nack
came back from one.  A strategy acts only through the helpers here, which run the forwarder's
outgoing pipelines, so the PIT stays consistent whatever the strategy does.

One strategy instance per forwarder and instance name (the name with its version and parameters,
e.g. ``/localhost/nfd/strategy/asf/v=5/clone-after~50``), shared by every prefix that chose that
name: per-Interest state belongs in ``PitEntry.strategy_info``, never on the instance.  State
about the network (an adaptive strategy's measurements) may live on the instance, bounded.

Beyond the two choices, a strategy may ask to hear how its Interests end, as NFD's
``beforeSatisfyInterest`` and ASF's timeouts do: :meth:`Strategy.watch` marks a PIT entry, and
the pipelines then call :meth:`~Strategy.before_satisfy_interest` when Data satisfies it and
:meth:`~Strategy.on_interest_expired` when it expires unanswered.  Entries nobody watches cost
the pipelines one dict probe, so strategies that do not care pay nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from mypy_extensions import mypyc_attr

from icn.errors import ConfigError
from icn.wire import tlv_types as T
from icn.wire.name import component_ends
from icn.wire.packet import hint_names

if TYPE_CHECKING:
    from forwarder.face_api import FaceLike
    from forwarder.fw.forwarder_base import ForwarderBase
    from forwarder.table.fib import FibEntry, NextHop
    from forwarder.table.pit import PitEntry
    from icn.wire.packet import DataView

STRATEGY_PREFIX = "/localhost/nfd/strategy/"

# strategy_info key of the strategy that watches an entry (see Strategy.watch)
WATCHER = "strategy"

_NO_NEXTHOPS: tuple[NextHop, ...] = ()


def nack_severity(reason: int) -> int:
    """Rank for picking the least severe Nack: Congestion < Duplicate < NoRoute < None/unknown."""
    if reason in (T.NACK_CONGESTION, T.NACK_DUPLICATE, T.NACK_NO_ROUTE):
        return reason
    return 1 << 30


class InterestContext:
    """The Interest being forwarded, as the strategy and the outgoing pipeline need it.

    ``wire`` is what goes upstream: the received bytes, or the copy with HopLimit decremented.
    ``nonlocal_ok`` says whether a non-local face may receive it (scope and HopLimit allow).
    """

    __slots__ = ("ingress", "joined", "lifetime", "nonce", "nonlocal_ok", "now", "wire")

    def __init__(
        self,
        ingress: FaceLike,
        wire: bytes,
        nonce: bytes,
        lifetime: int,
        nonlocal_ok: bool,
        now: float,
        joined: bool = False,
    ) -> None:
        self.ingress = ingress
        # the ingress face had no in-record in the entry: another consumer, not a retransmission
        self.joined = joined
        self.wire = wire
        self.nonce = nonce
        self.lifetime = lifetime  # ms
        self.nonlocal_ok = nonlocal_ok
        self.now = now

    def is_eligible(self, face: FaceLike) -> bool:
        """May this Interest go out on ``face``?  Never back to the ingress (all our faces are
        point-to-point), and a non-local face only when scope and HopLimit allow."""
        return face.face_id != self.ingress.face_id and (self.nonlocal_ok or face.is_local)


# a strategy of one's own may subclass this in plain Python (STRATEGIES), also where the
# forwarder is compiled (pyproject.toml [tool.icn] compiled)
@mypyc_attr(allow_interpreted_subclasses=True)
class Strategy:
    """Base class of forwarding strategies.  Subclasses set ``name`` and implement
    :meth:`after_receive_interest`; the default Nack handling is NFD's ``processNack``.

    ``parameters`` are the ``key~value`` components that followed the version in the instance
    name, already checked by :meth:`check_parameters`.
    """

    name: ClassVar[str] = ""  # short name, e.g. "best-route"
    version: ClassVar[int] = 0

    def __init__(self, fw: ForwarderBase, parameters: Mapping[str, str] | None = None) -> None:
        self.fw = fw
        # The forwarder never replaces these objects, so holding them saves a lookup per packet.
        self.faces = fw.faces
        self.fib = fw.fib
        self.counters = fw.counters
        self.parameters: dict[str, str] = self.check_parameters(parameters or {})
        self.full_name = self.instance_name_with(self.parameters)

    @classmethod
    def instance_name(cls) -> str:
        """The canonical NFD instance name, e.g. ``/localhost/nfd/strategy/best-route/v=5``
        (without parameters: an instance's whole name is its ``full_name``)."""
        return f"{STRATEGY_PREFIX}{cls.name}/v={cls.version}"

    @classmethod
    def instance_name_with(cls, parameters: Mapping[str, str]) -> str:
        """The instance name with checked ``parameters`` after the version."""
        return cls.instance_name() + "".join(f"/{k}~{v}" for k, v in parameters.items())

    @classmethod
    def check_parameters(cls, parameters: Mapping[str, str]) -> dict[str, str]:
        """The parameters in canonical form; ConfigError naming a bad one and the fix.  This
        strategy takes none (NFD's parameters follow the version: ``.../v=5/key~value``)."""
        if parameters:
            given = ", ".join(f"{k}~{v}" for k, v in parameters.items())
            raise ConfigError(
                f"strategy {cls.name} takes no parameters (got {given}); use {cls.instance_name()}"
            )
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.full_name})"

    # -- triggers ------------------------------------------------------------------------------

    def after_receive_interest(self, entry: PitEntry, ctx: InterestContext) -> None:
        """An Interest reached ``entry`` (new, aggregated or retransmitted) and needs upstreams."""
        raise NotImplementedError

    def after_receive_nack(self, entry: PitEntry, ingress_id: int, reason: int, now: float) -> None:
        """An upstream Nacked our Interest (its out-record already carries ``reason``).  If no
        upstream is left pending afterwards, the pipeline ends the entry at the next tick."""
        self.process_nack(entry)

    def before_satisfy_interest(
        self, entry: PitEntry, ingress_id: int, now: float, data: DataView
    ) -> None:
        """``data`` from ``ingress_id`` satisfies a watched entry, whose out-records are still
        all there (NFD's ``beforeSatisfyInterest``).  Default: nothing."""

    def on_interest_expired(self, entry: PitEntry, now: float) -> None:
        """A watched entry expired unsatisfied: its out-records that carry no Nack were never
        answered.  Default: nothing."""

    def after_receive_unsolicited_data(self, face_id: int, data: DataView, now: float) -> bool:
        """Data from ``face_id`` matched no PIT entry.  True if this strategy was expecting it
        (a late answer from an upstream it also sent to) and has counted it; the forwarder
        drops it either way.  Default: not expected."""
        return False

    def tick(self, now: float) -> None:
        """The forwarder's periodic timer (every few tens of ms): run what is due.  Strategies
        keep their timers in one structure each and act here, never with a task per Interest."""

    # -- helpers -------------------------------------------------------------------------------

    def watch(self, entry: PitEntry) -> None:
        """Be told how ``entry`` ends (:meth:`before_satisfy_interest`,
        :meth:`on_interest_expired`)."""
        entry.strategy_info[WATCHER] = self

    def nexthops(self, entry: PitEntry) -> Sequence[NextHop]:
        """The FIB next hops for the entry, cheapest first (empty when there is no route)."""
        fib_entry = self.fib_entry(entry)
        return _NO_NEXTHOPS if fib_entry is None else fib_entry.nexthops

    def fib_entry(self, entry: PitEntry) -> FibEntry | None:
        """The route for the entry: by its Interest's name, or, when the Interest carries a
        ForwardingHint, by the first of the hint's names that has one (other than the default
        route), as NFD's ``Strategy::lookupFib`` outside the producer's region.  A hint whose
        names have no route falls back to the Interest's name.  A result's name says what it is
        and a hint where to find it (``/cfn/obj/<digest>`` toward ``/cfn/node/<id>``), so the
        name stays the same wherever the copy lives and any content store can answer it."""
        hint = entry.hint
        if hint is not None:
            for name in hint_names(hint):
                found = self.fib.longest_prefix_match(name, component_ends(name))
                if found is not None and found.prefix and found.nexthops:
                    return found
        return self.fib.longest_prefix_match(entry.name, entry.name_ends)

    def send_interest(self, entry: PitEntry, face: FaceLike, ctx: InterestContext) -> None:
        self.fw.send_interest(entry, face, ctx)

    def send_nack(self, entry: PitEntry, face_id: int, reason: int) -> None:
        self.fw.send_nack(entry, face_id, reason)

    def send_nacks(self, entry: PitEntry, reason: int) -> None:
        """Nack every downstream, each with its own Interest and PitToken."""
        for face_id in list(entry.in_records):
            self.fw.send_nack(entry, face_id, reason)

    def reject_pending_interest(self, entry: PitEntry) -> None:
        """Give up on the entry now: it is finalized as unsatisfied."""
        self.fw.reject(entry)

    def no_upstream(self, entry: PitEntry, ctx: InterestContext, new: bool) -> None:
        """No next hop to try: a new Interest is Nacked NoRoute and its entry given up; a
        retransmission is only counted (the earlier out-records may still answer)."""
        if new:
            self.counters["fw.nack_no_route"] += 1
            self.send_nack(entry, ctx.ingress.face_id, T.NACK_NO_ROUTE)
            self.reject_pending_interest(entry)
        else:
            self.counters["fw.retx_no_nexthop"] += 1

    @staticmethod
    def has_pending_out_records(entry: PitEntry, now: float) -> bool:
        """True if some upstream may still answer (out-record unexpired and not Nacked)."""
        for out in entry.out_records.values():
            if out.nack_reason is None and out.expiry >= now:
                return True
        return False

    def process_nack(self, entry: PitEntry) -> None:
        """NFD's ``ProcessNackTraits``: wait until every upstream has Nacked, then Nack every
        downstream with the least severe reason seen.  When exactly one upstream is still
        silent and it is also a downstream, Nack it at once: it would otherwise wait for its
        own Interest to come back to it."""
        not_nacked = 0
        last_not_nacked = -1
        least = T.NACK_NONE
        least_rank = nack_severity(least)
        for face_id, out in entry.out_records.items():
            reason = out.nack_reason
            if reason is None:
                not_nacked += 1
                last_not_nacked = face_id
                continue
            rank = nack_severity(reason)
            if rank < least_rank:
                least, least_rank = reason, rank
        if not_nacked == 1 and last_not_nacked in entry.in_records:
            self.send_nack(entry, last_not_nacked, least)
            return
        if not_nacked:
            return
        self.send_nacks(entry, least)
        self.reject_pending_interest(entry)


def watcher_of(entry: PitEntry) -> Strategy | None:
    """The strategy watching ``entry`` (see :meth:`Strategy.watch`), or None: one dict probe,
    none at all for the usual entry without strategy state."""
    info = entry.strategy_info
    if not info:
        return None
    watcher = info.get(WATCHER)
    return watcher if isinstance(watcher, Strategy) else None
