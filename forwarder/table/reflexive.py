"""Reflexive table: reverse-path state of Trigger Interests (docs/design.md section 5; the IRTF
reflexive forwarding draft's template-PIT design).

A Trigger Interest (TI) ends its name with a Reflexive Name Segment (component type 59, the
consumer's random RNP); a Reflexive Interest (RI) starts its name with the same segment.  The
whole segment TLV is the key: it maps to the TI's PIT entry, whose in-records are the faces an RI
must go to (the draft's "template PIT").  The state lives exactly as long as that PIT entry, so
it needs no timer of its own: the forwarder ends it from ``finalize``, and a lookup that finds
the TI entry gone (erased without finalize, e.g. by a face going down) treats it as absent.

Bounded because every TI adds one (an interest-flooding consumer must not grow it without
limit, §5.6); when full, or when the TI's face has used its share of the table (or non-local
faces theirs, :mod:`forwarder.table.face_shares`), the forwarder refuses the TI.  Reflexive
Data may be cached for an RI's retransmissions only while the state lives: ``purge`` is called
with the key of a state that cached any, when it ends, so nothing answers a later exchange or
another consumer (§5.4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from forwarder.table.face_shares import FaceShares
from forwarder.table.pit import PitEntry


class ReflexiveState:
    """The TI's PIT entry and whether any Reflexive Data for its RNP went into the CS."""

    __slots__ = ("cached", "entry")

    def __init__(self, entry: PitEntry) -> None:
        self.entry = entry
        self.cached = False

    def __repr__(self) -> str:
        return f"ReflexiveState(entry={self.entry!r}, cached={self.cached})"


def _no_purge(key: bytes) -> None:
    return None


class ReflexiveTable:
    """Reflexive key (segment TLV bytes) -> :class:`ReflexiveState`, at most ``max_entries``.

    A state counts against the share of the face that made its TI's PIT entry (its owner).
    Counts "rft.insert", "rft.erase" (every removal) and "rft.refused_full",
    "rft.refused_face_share" or "rft.refused_reserve".
    """

    __slots__ = ("_counters", "_purge", "_states", "max_entries", "shares")

    def __init__(
        self,
        max_entries: int = 10_000,
        counters: Counter[str] | None = None,
        purge: Callable[[bytes], object] = _no_purge,
        face_share: float = 1.0,
        local_reserve: float = 0.0,
    ) -> None:
        self._counters: Counter[str] = Counter() if counters is None else counters
        self.shares = FaceShares("rft", max_entries, face_share, local_reserve, self._counters)
        self.max_entries = max_entries
        self._purge = purge
        self._states: dict[bytes, ReflexiveState] = {}

    def insert(self, key: bytes, entry: PitEntry) -> ReflexiveState | None:
        """The state of ``key``, new for ``entry`` if there was no live one; None when full.

        A live state of another entry is returned as is: an RNP is single-use, so a second TI
        carrying it must not take over the reverse path of the first.
        """
        state = self.find(key)
        if state is not None:
            return state
        if not self.shares.admit(len(self._states), entry.owner, entry.owner_local):
            return None
        self.shares.charge(entry.owner, entry.owner_local)
        state = self._states[key] = ReflexiveState(entry)
        self._counters["rft.insert"] += 1
        return state

    def find(self, key: bytes) -> ReflexiveState | None:
        """The live state of ``key``; one whose TI entry has left the PIT is removed instead."""
        state = self._states.get(key)
        if state is None or state.entry.live:
            return state
        self._remove(key, state)
        return None

    def erase(self, key: bytes, entry: PitEntry) -> bool:
        """End the state of ``key`` if it belongs to ``entry`` (the TI is done); True if so."""
        state = self._states.get(key)
        if state is None or state.entry is not entry:
            return False
        self._remove(key, state)
        return True

    def prune(self) -> int:
        """Remove every state whose TI entry has left the PIT; return how many.  O(size): for
        rare events that erase PIT entries in bulk without finalizing them (a face going down)."""
        dead = [(k, s) for k, s in self._states.items() if not s.entry.live]
        for key, state in dead:
            self._remove(key, state)
        return len(dead)

    def _remove(self, key: bytes, state: ReflexiveState) -> None:
        del self._states[key]
        self.shares.release(state.entry.owner, state.entry.owner_local)
        self._counters["rft.erase"] += 1
        if state.cached:
            self._purge(key)

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: bytes) -> bool:
        return self.find(key) is not None
