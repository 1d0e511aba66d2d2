"""The app-side PIT: the Interests an app expressed and still awaits (docs/design.md section 4).

Data is matched as a forwarder's PIT matches it: by exact name, by a proper prefix for a
CanBePrefix Interest, by full name (with the implicit digest) for an Interest naming one; a
Nack answers the transmission whose Nonce it carries and fails the Interests aggregated with
it.  A Trigger Interest (its name ends in a reflexive segment) waits longer while Reflexive
Interests for it arrive.  The table is free of I/O: no clock (deadlines are the caller's
numbers, the extension's end is passed in), no futures, no timers; every question returns the
entries concerned and the caller acts on them.

The caller's own state (the asyncio endpoint keeps a future, a timer and a verifier per
Interest) goes in a subclass of :class:`PendingEntry`, and the table is generic over it: one
object per Interest, so a Data reaches its future without a second lookup, and the fetcher
holds the same record it will drop.  The table never reads what it does not define.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from icn.errors import TooManyPending
from icn.wire import tlv_types as T
from icn.wire.encode import EncodedInterest
from icn.wire.packet import DataView
from icn.wire.reflexive import trigger_key


class PendingEntry:
    """One expressed Interest: its wire and what matching needs of it."""

    __slots__ = (
        "congestion_mark",
        "deadline",
        "digest",
        "done",
        "lifetime",
        "mbf",
        "name",
        "nonce_pos",
        "prefix",
        "trigger",
        "wire",
    )

    def __init__(
        self, enc: EncodedInterest, lifetime_ms: int, can_be_prefix: bool, must_be_fresh: bool
    ) -> None:
        self.name = enc.name
        self.prefix = can_be_prefix
        self.mbf = must_be_fresh
        ends = enc.name_ends
        # a name ending in an implicit digest is answered by the Data whose full name it is
        self.digest = enc.name[ends[-2] if len(ends) > 1 else 0] == T.COMP_IMPLICIT_DIGEST
        self.wire = enc.wire
        self.nonce_pos = enc.nonce_pos
        self.lifetime = lifetime_ms / 1000.0  # seconds
        # when it expires, in the caller's clock (set when sent; moved by extend_triggers)
        self.deadline = 0.0
        self.done = False  # dropped from the table
        # the reflexive segment ending a Trigger Interest's name: Reflexive Interests for it
        # extend this Interest's wait, as forwarders extend its PIT entry
        self.trigger = trigger_key(enc.name, ends)
        # the CongestionMark of the Data that satisfied it (0: none): a window of Interests
        # shrinks on a marked Data as on a timeout
        self.congestion_mark = 0


E = TypeVar("E", bound=PendingEntry)


class PendingTable(Generic[E]):
    """At most ``max_pending`` entries (``E``, a :class:`PendingEntry`), by name and trigger."""

    __slots__ = ("_by_name", "_len", "_n_digest", "_n_prefix", "_triggers", "max_pending")

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self._by_name: dict[bytes, list[E]] = {}
        self._triggers: dict[bytes, list[E]] = {}
        # how many entries match by prefix or by digest: Data pays for those lookups only
        # while some exist
        self._n_prefix = self._n_digest = 0
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def check_room(self) -> None:
        """TooManyPending if the table is full (before an Interest is built for it)."""
        if self._len >= self.max_pending:
            raise TooManyPending(f"{self._len} Interests pending; wait for some to finish")

    def add(self, entry: E) -> None:
        self.check_room()
        self._by_name.setdefault(entry.name, []).append(entry)
        if entry.trigger is not None:
            self._triggers.setdefault(entry.trigger, []).append(entry)
        self._len += 1
        self._n_prefix += entry.prefix
        self._n_digest += entry.digest

    def drop(self, entry: E) -> bool:
        """Forget ``entry``; False if it was gone already (dropping is idempotent)."""
        if entry.done:
            return False
        entry.done = True
        same = self._by_name[entry.name]
        same.remove(entry)
        if not same:
            del self._by_name[entry.name]
        if entry.trigger is not None:
            triggered = self._triggers[entry.trigger]
            triggered.remove(entry)
            if not triggered:
                del self._triggers[entry.trigger]
        self._len -= 1
        self._n_prefix -= entry.prefix
        self._n_digest -= entry.digest
        return True

    def entries(self) -> list[E]:
        """Every entry, in a list of its own (the caller may drop them as it goes)."""
        return [e for same in self._by_name.values() for e in same]

    def match_data(self, dv: DataView) -> list[E]:
        """The entries ``dv`` satisfies; the caller drops them."""
        by_name = self._by_name
        name = dv.name
        hits = list(by_name.get(name, ()))
        if self._n_prefix:
            for end in dv.name_ends[:-1]:
                hits += [e for e in by_name.get(name[:end], ()) if e.prefix]
        if self._n_digest:
            hits += by_name.get(dv.full_name, ())
        return hits

    def match_nack(self, name: bytes, nonce: bytes | None) -> list[E]:
        """The entries a Nack of the Interest ``name`` with ``nonce`` fails, or none.

        NFD's rule: a Nack answers the transmission whose Nonce it carries, and with it the
        entries aggregated with it (same name and selectors); a Nack for an earlier
        transmission, since retransmitted with another Nonce, is stale and fails nothing.
        """
        same = self._by_name.get(name, ())
        match = next((e for e in same if e.wire[e.nonce_pos : e.nonce_pos + 4] == nonce), None)
        if match is None:
            return []
        return [e for e in same if (e.prefix, e.mbf) == (match.prefix, match.mbf)]

    @property
    def triggers_waiting(self) -> bool:
        """Whether any Trigger Interest is pending (else no Interest need be checked for one)."""
        return bool(self._triggers)

    def extend_triggers(self, key: bytes, until: float) -> list[E]:
        """A Reflexive Interest for ``key`` arrived: the Trigger Interests it names wait until
        ``until`` at least.  Returns those whose ``deadline`` moved (never earlier)."""
        moved = []
        for entry in self._triggers.get(key, ()):
            if entry.deadline < until:
                entry.deadline = until
                moved.append(entry)
        return moved
