"""State shared by the pipelines: tables, faces, strategies, and the outgoing pipelines.

The incoming pipelines (``interest_pipeline``, ``data_pipeline``, ``nack_pipeline``) subclass
this and :class:`~forwarder.fw.forwarder.Forwarder` combines them; the split keeps each file
about one pipeline.  Strategies act only through the outgoing pipelines here (``send_interest``,
``send_nack``, ``reject``), so the PIT stays consistent whatever a strategy decides.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from forwarder.face_api import FaceLike
from forwarder.fw.strategy import InterestContext, Strategy
from forwarder.fw.strategy_registry import parse
from forwarder.table.cs import ContentStore
from forwarder.table.dead_nonce_list import DeadNonceList
from forwarder.table.fib import Fib
from forwarder.table.limits import TableLimits
from forwarder.table.pit import Pit, PitEntry
from forwarder.table.reflexive import ReflexiveTable
from forwarder.table.strategy_choice import StrategyChoice
from icn.wire import tlv_types as T

# First name components that scope a packet (NFD's scope rules), as TLV bytes: a name value
# starts with its first component's TLV, so a startswith() on the name is the scope test.
LOCALHOST = b"\x08\x09localhost"
LOCALHOP = b"\x08\x08localhop"

# TableLimits is a frozen dataclass, so one shared default instance is safe.
DEFAULT_LIMITS = TableLimits()


class ForwarderBase:
    """Tables, faces and strategy instances of one forwarder, and its outgoing pipelines."""

    def __init__(
        self,
        limits: TableLimits = DEFAULT_LIMITS,
        counters: Counter[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        default_strategy: str = "best-route",
    ) -> None:
        self.limits = limits
        self.counters: Counter[str] = Counter() if counters is None else counters
        self.clock = clock
        c = self.counters
        self.faces: dict[int, FaceLike] = {}
        self.fib = Fib(limits.fib_max_entries, c)
        self.pit = Pit(limits.pit_max_entries, c, limits.face_share, limits.local_reserve)
        self.cs = ContentStore(limits.cs_max_entries, limits.cs_max_bytes, c)
        self.dnl = DeadNonceList(limits.dnl_lifetime, limits.dnl_max_entries, c)
        # Reflexive Data cached for an exchange is purged from the CS when the exchange ends.
        self.rft = ReflexiveTable(
            limits.reflexive_max_entries, c, self.cs.erase, limits.face_share, limits.local_reserve
        )
        self.max_lifetime_ms = limits.interest_lifetime_max_ms
        # Interests refused for want of room (PIT or reflexive table), per face: who is flooding.
        self.refused_by_face: Counter[int] = Counter()
        # DataView.freshness is in ms; compared per Data against the DNL lifetime.
        self.dnl_lifetime_ms = limits.dnl_lifetime * 1000.0
        self._strategies: dict[str, Strategy] = {}
        self.strategy_choice: StrategyChoice[Strategy] = StrategyChoice(
            self._strategy_instance(default_strategy),
            limits.strategy_choice_max_entries,
            c,
        )

    def _strategy_instance(self, name: str) -> Strategy:
        """The instance for strategy ``name`` (ConfigError if unknown or badly parametrized).
        One per instance name, parameters included: strategies keep per-Interest state in the
        PIT entry, and prefixes that chose the same parameters share what the instance learns."""
        cls, params = parse(name)
        full = cls.instance_name_with(params)
        inst = self._strategies.get(full)
        if inst is None:
            inst = self._strategies[full] = cls(self, params)
        return inst

    def strategies(self) -> list[Strategy]:
        """Every strategy instance made so far (chosen now or earlier), for timers and status."""
        return list(self._strategies.values())

    # -- outgoing pipelines (called by strategies) ---------------------------------------------

    def send_interest(self, entry: PitEntry, face: FaceLike, ctx: InterestContext) -> None:
        """Outgoing Interest: record the upstream and send the bytes (never with a PitToken)."""
        if face.face_id == ctx.ingress.face_id:
            # All our faces are point-to-point: an Interest sent back where it came from loops.
            self.counters["fw.drop_out_to_ingress"] += 1
            return
        if not (ctx.nonlocal_ok or face.is_local):
            self.counters["fw.drop_out_scope"] += 1
            return
        entry.insert_out_record(face.face_id, ctx.nonce, ctx.now, ctx.lifetime)
        face.send_interest(ctx.wire)
        self.counters["fw.out_interest"] += 1

    def send_nack(self, entry: PitEntry, face_id: int, reason: int) -> None:
        """Outgoing Nack: to a downstream that has an in-record, carrying its own Interest and
        PitToken; the in-record goes, since that downstream now expects nothing more."""
        rec = entry.in_records.pop(face_id, None)
        if rec is None:
            return
        face = self.faces.get(face_id)
        if face is None:
            return
        face.send_nack(rec.wire, reason, rec.pit_token)
        self.counters["fw.out_nack"] += 1

    def refuse(self, face: FaceLike, wire: bytes, pit_token: bytes | None) -> None:
        """A new Interest found no room (its face, or non-local faces, used their share, or the
        table is full): Nack Congestion at once, carrying its own Interest, so the consumer
        backs off instead of waiting a lifetime in silence.  No PIT state."""
        self.refused_by_face[face.face_id] += 1
        face.send_nack(wire, T.NACK_CONGESTION, pit_token)
        self.counters["fw.out_nack"] += 1

    def reject(self, entry: PitEntry) -> None:
        """Give up on ``entry`` now: erase and finalize it (unsatisfied)."""
        self.pit.erase(entry)
        self.finalize(entry, self.clock())

    def finalize(self, entry: PitEntry, now: float) -> None:
        """Interest finalize, for an entry already out of the PIT: count its outcome and record
        the nonces it sent in the Dead Nonce List, so a copy of one of its Interests looping
        back after the entry is gone is still caught.  A Trigger Interest's reverse state ends
        here (its Data passed, it expired or was rejected): later RIs for it are dropped."""
        key = entry.reflexive_key
        if key is not None:
            self.rft.erase(key, entry)
        if entry.satisfied:
            self.counters["fw.interest_satisfied"] += 1
            # A MustBeFresh Interest may be legitimately re-expressed (same nonce) once the Data
            # is stale, so only short-lived Data leaves the nonces behind.
            if not entry.must_be_fresh or entry.data_freshness >= self.dnl_lifetime_ms:
                return
        else:
            self.counters["fw.interest_unsatisfied"] += 1
        add = self.dnl.add
        name = entry.name
        for out in entry.out_records.values():
            add(name, out.nonce, now)
