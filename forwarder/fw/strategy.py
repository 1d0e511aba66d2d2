"""The strategy interface: what a forwarding strategy is told, and the helpers it acts with.

Modelled on NFD's ``nfd::fw::Strategy``.  The forwarder runs the parts of the pipelines every
strategy shares (parsing, loop and scope checks, PIT and CS work) and calls a strategy at the two
points where forwarding is a choice: a new or retransmitted Interest needs upstreams, and a Nack
came back from one.  A strategy acts only through the helpers here, which run the forwarder's
outgoing pipelines, so the PIT stays consistent whatever the strategy does.

One strategy instance per forwarder and class, shared by every prefix that chose it: per-Interest
state belongs in ``PitEntry.strategy_info``, never on the instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from icn.wire import tlv_types as T

if TYPE_CHECKING:
    from forwarder.face_api import FaceLike
    from forwarder.fw.forwarder_base import ForwarderBase
    from forwarder.table.fib import NextHop
    from forwarder.table.pit import PitEntry

STRATEGY_PREFIX = "/localhost/nfd/strategy/"

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

    __slots__ = ("ingress", "lifetime", "nonce", "nonlocal_ok", "now", "wire")

    def __init__(
        self,
        ingress: FaceLike,
        wire: bytes,
        nonce: bytes,
        lifetime: int,
        nonlocal_ok: bool,
        now: float,
    ) -> None:
        self.ingress = ingress
        self.wire = wire
        self.nonce = nonce
        self.lifetime = lifetime  # ms
        self.nonlocal_ok = nonlocal_ok
        self.now = now

    def is_eligible(self, face: FaceLike) -> bool:
        """May this Interest go out on ``face``?  Never back to the ingress (all our faces are
        point-to-point), and a non-local face only when scope and HopLimit allow."""
        return face.face_id != self.ingress.face_id and (self.nonlocal_ok or face.is_local)


class Strategy:
    """Base class of forwarding strategies.  Subclasses set ``name`` and implement
    :meth:`after_receive_interest`; the default Nack handling is NFD's ``processNack``."""

    name: ClassVar[str] = ""  # short name, e.g. "best-route"
    version: ClassVar[int] = 0

    def __init__(self, fw: ForwarderBase) -> None:
        self.fw = fw
        # The forwarder never replaces these objects, so holding them saves a lookup per packet.
        self.faces = fw.faces
        self.fib = fw.fib
        self.counters = fw.counters

    @classmethod
    def instance_name(cls) -> str:
        """The canonical NFD instance name, e.g. ``/localhost/nfd/strategy/best-route/v=5``."""
        return f"{STRATEGY_PREFIX}{cls.name}/v={cls.version}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.instance_name()})"

    # -- triggers ------------------------------------------------------------------------------

    def after_receive_interest(self, entry: PitEntry, ctx: InterestContext) -> None:
        """An Interest reached ``entry`` (new, aggregated or retransmitted) and needs upstreams."""
        raise NotImplementedError

    def after_receive_nack(self, entry: PitEntry, ingress_id: int, reason: int, now: float) -> None:
        """An upstream Nacked our Interest (its out-record already carries ``reason``)."""
        self.process_nack(entry)

    # -- helpers -------------------------------------------------------------------------------

    def nexthops(self, entry: PitEntry) -> Sequence[NextHop]:
        """The FIB next hops for the entry's name, cheapest first (empty when there is no route)."""
        fib_entry = self.fib.longest_prefix_match(entry.name, entry.name_ends)
        return _NO_NEXTHOPS if fib_entry is None else fib_entry.nexthops

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
