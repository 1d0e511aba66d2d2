"""Pending Interest Table: Interests forwarded upstream and not yet answered.

Entries are keyed as in NFD by Name + CanBePrefix + MustBeFresh.  They live in a dict from name
bytes to a short list (at most four entries, one per flag pair, almost always one), so the common
lookups are one dict probe and no per-packet key allocation.  Data matching follows
``Interest::matchesData``: exact name, CanBePrefix entries on any prefix of the Data name, and
entries whose name is the Data's full name (implicit digest).  The last two cost extra probes
(and, for the digest, a SHA-256 of the Data), so they are only run while such entries exist.

Each entry is charged to the face whose Interest made it (``owner``), so one face cannot take
more than its share of the table and non-local faces cannot take the room kept for local apps
and management (:mod:`forwarder.table.face_shares`).

Expiry is batched: one heap of (expiry, seq, entry) for the whole table, with lazy deletion (a
rescheduled or erased entry leaves a stale item that is skipped when popped), so the daemon runs
one timer for the PIT instead of one per entry.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterator

from forwarder.table.face_shares import FaceShares
from icn.wire import tlv_types as T
from icn.wire.packet import DataView, InterestView


class InRecord:
    """A downstream that asked: its last nonce, when its Interest expires, its PitToken, and its
    own Interest wire (a Nack to it must carry its own Interest)."""

    __slots__ = ("expiry", "face_id", "last_renewed", "nonce", "pit_token", "wire")

    def __init__(
        self,
        face_id: int,
        nonce: bytes,
        expiry: float,
        pit_token: bytes | None,
        wire: bytes,
        last_renewed: float,
    ) -> None:
        self.face_id = face_id
        self.nonce = nonce
        self.expiry = expiry
        self.pit_token = pit_token
        self.wire = wire
        self.last_renewed = last_renewed

    def __repr__(self) -> str:
        return f"InRecord(face_id={self.face_id}, nonce={self.nonce.hex()}, expiry={self.expiry})"


class OutRecord:
    """An upstream the Interest was sent to: last nonce, when, until when, and its Nack if any."""

    __slots__ = ("expiry", "face_id", "last_sent", "nack_reason", "nonce")

    def __init__(self, face_id: int, nonce: bytes, last_sent: float, expiry: float) -> None:
        self.face_id = face_id
        self.nonce = nonce
        self.last_sent = last_sent
        self.expiry = expiry
        self.nack_reason: int | None = None

    def __repr__(self) -> str:
        return (
            f"OutRecord(face_id={self.face_id}, nonce={self.nonce.hex()}, expiry={self.expiry}, "
            f"nack_reason={self.nack_reason})"
        )


class PitEntry:
    """One pending Interest (name + CanBePrefix + MustBeFresh) and its in- and out-records.

    ``expiry`` is infinite until the pipeline calls :meth:`Pit.set_expiry`.
    """

    __slots__ = (
        "_is_digest",
        "_live",
        "_seq",
        "can_be_prefix",
        "data_freshness",
        "expiry",
        "hint",
        "in_records",
        "must_be_fresh",
        "name",
        "name_ends",
        "out_records",
        "owner",
        "owner_local",
        "reflexive_key",
        "satisfied",
        "strategy_info",
        "wire",
    )

    def __init__(self, interest: InterestView, owner: int = 0, owner_local: bool = True) -> None:
        self.name = interest.name
        self.name_ends = interest.name_ends
        self.can_be_prefix = interest.can_be_prefix
        self.must_be_fresh = interest.must_be_fresh
        self.wire = interest.wire
        # The ForwardingHint's TLV-VALUE (None without one): the strategy looks the route up by
        # its names rather than the Interest's (docs/design.md section 5, "Forwarding hints").
        # The first Interest's hint is kept; those aggregated on it are forwarded with it.
        self.hint: bytes | None = interest.forwarding_hint
        self.in_records: dict[int, InRecord] = {}
        self.out_records: dict[int, OutRecord] = {}
        self.expiry = math.inf
        self.satisfied = False
        self.data_freshness = 0
        self.strategy_info: dict[str, object] = {}
        # The face whose Interest made the entry: the entry counts against that face's share
        # until it leaves the table, whoever else aggregates on it meanwhile.
        self.owner = owner
        self.owner_local = owner_local
        # The Reflexive Name Segment of a Trigger Interest whose reverse state this entry holds
        # (forwarder.table.reflexive): None for every other entry, so finalize checks one slot.
        self.reflexive_key: bytes | None = None
        ends = interest.name_ends
        self._is_digest = bool(ends) and (
            interest.name[ends[-2] if len(ends) > 1 else 0] == T.COMP_IMPLICIT_DIGEST
        )
        self._live = True  # False once erased from its Pit
        self._seq = 0  # sequence number of the entry's valid heap item (0: none)

    @property
    def live(self) -> bool:
        """True until the entry is erased from its Pit."""
        return self._live

    def insert_in_record(
        self,
        face_id: int,
        nonce: bytes,
        now: float,
        lifetime_ms: int,
        pit_token: bytes | None,
        wire: bytes,
    ) -> InRecord:
        """Insert or refresh the in-record of ``face_id`` (one per downstream face)."""
        expiry = now + lifetime_ms * 0.001
        rec = self.in_records.get(face_id)
        if rec is None:
            rec = self.in_records[face_id] = InRecord(face_id, nonce, expiry, pit_token, wire, now)
        else:
            rec.nonce = nonce
            rec.expiry = expiry
            rec.pit_token = pit_token
            rec.wire = wire
            rec.last_renewed = now
        return rec

    def insert_out_record(
        self, face_id: int, nonce: bytes, now: float, lifetime_ms: int
    ) -> OutRecord:
        """Insert or refresh the out-record of ``face_id``; a resend clears an earlier Nack."""
        expiry = now + lifetime_ms * 0.001
        rec = self.out_records.get(face_id)
        if rec is None:
            rec = self.out_records[face_id] = OutRecord(face_id, nonce, now, expiry)
        else:
            rec.nonce = nonce
            rec.last_sent = now
            rec.expiry = expiry
            rec.nack_reason = None
        return rec

    def has_nonce(self, nonce: bytes, exclude_in_face: int | None = None) -> bool:
        """True if any record's last nonce is ``nonce`` (a loop), ignoring the in-record of
        ``exclude_in_face`` (a retransmission from the same point-to-point downstream)."""
        for rec in self.in_records.values():
            if rec.nonce == nonce and rec.face_id != exclude_in_face:
                return True
        return any(rec.nonce == nonce for rec in self.out_records.values())

    def __repr__(self) -> str:
        return (
            f"PitEntry(name={self.name.hex()}, cbp={self.can_be_prefix}, "
            f"mbf={self.must_be_fresh}, in={list(self.in_records)}, out={list(self.out_records)})"
        )


class Pit:
    """The PIT, bounded by ``max_entries``, of which one face may make at most ``face_share``
    and non-local faces together all but ``local_reserve``.

    Counts "pit.insert", "pit.erase" (every removal, expiry included), "pit.expired" and, for a
    new Interest refused, "pit.refused_full", "pit.refused_face_share" or "pit.refused_reserve".
    """

    __slots__ = (
        "_by_name",
        "_counters",
        "_heap",
        "_n_cbp",
        "_n_digest",
        "_seq",
        "_size",
        "max_entries",
        "shares",
    )

    def __init__(
        self,
        max_entries: int = 100_000,
        counters: Counter[str] | None = None,
        face_share: float = 1.0,
        local_reserve: float = 0.0,
    ) -> None:
        self._counters: Counter[str] = Counter() if counters is None else counters
        self.shares = FaceShares("pit", max_entries, face_share, local_reserve, self._counters)
        self.max_entries = max_entries
        self._by_name: dict[bytes, list[PitEntry]] = {}
        self._heap: list[tuple[float, int, PitEntry]] = []
        self._seq = 0
        self._size = 0
        self._n_cbp = 0  # live CanBePrefix entries: Data must probe its prefixes
        self._n_digest = 0  # live entries named with an implicit digest: Data must hash itself

    def find_or_insert(
        self, interest: InterestView, face_id: int = 0, is_local: bool = True
    ) -> tuple[PitEntry | None, bool]:
        """The entry of this Interest and whether it is new; (None, False) when a new entry
        is refused to ``face_id`` (the table is full, or that face or non-local faces have
        used their share).  An Interest that aggregates on an entry is never refused."""
        name = interest.name
        bucket = self._by_name.get(name)
        if bucket is not None:
            cbp = interest.can_be_prefix
            mbf = interest.must_be_fresh
            for entry in bucket:
                if entry.can_be_prefix == cbp and entry.must_be_fresh == mbf:
                    return entry, False
        if not self.shares.admit(self._size, face_id, is_local):
            return None, False
        self.shares.charge(face_id, is_local)
        entry = PitEntry(interest, face_id, is_local)
        if bucket is None:
            self._by_name[name] = [entry]
        else:
            bucket.append(entry)
        self._size += 1
        if entry.can_be_prefix:
            self._n_cbp += 1
        if entry._is_digest:
            self._n_digest += 1
        self._counters["pit.insert"] += 1
        return entry, True

    def find(self, interest: InterestView) -> PitEntry | None:
        """The entry with exactly this Interest's name, CanBePrefix and MustBeFresh."""
        bucket = self._by_name.get(interest.name)
        if bucket is not None:
            cbp = interest.can_be_prefix
            mbf = interest.must_be_fresh
            for entry in bucket:
                if entry.can_be_prefix == cbp and entry.must_be_fresh == mbf:
                    return entry
        return None

    def downstream_with_nonce(self, name: bytes, nonce: bytes | None) -> int | None:
        """The face whose pending Interest for ``name`` carries ``nonce``: who asked, for an
        internal producer (management) that must know its requester."""
        for entry in self._by_name.get(name, ()):
            for face_id, rec in entry.in_records.items():
                if rec.nonce == nonce:
                    return face_id
        return None

    def find_matches(self, data: DataView) -> list[PitEntry]:
        """Every entry whose Interest ``data`` satisfies (MustBeFresh plays no part)."""
        by_name = self._by_name
        name = data.name
        bucket = by_name.get(name)
        # Equal names match whatever CanBePrefix says (a name is a prefix of itself).
        out = [] if bucket is None else bucket[:]
        if self._n_cbp:
            for end in data.name_ends[:-1]:
                bucket = by_name.get(name[:end])
                if bucket is not None:
                    out.extend(e for e in bucket if e.can_be_prefix)
        if self._n_digest:
            bucket = by_name.get(data.full_name)
            if bucket is not None:
                out.extend(bucket)
        return out

    def set_expiry(self, entry: PitEntry, expiry: float) -> None:
        """(Re)schedule ``entry`` to expire at ``expiry``; ignored for an erased entry."""
        if not entry._live:
            return
        self._seq = seq = self._seq + 1
        entry._seq = seq
        entry.expiry = expiry
        heap = self._heap
        heapq.heappush(heap, (expiry, seq, entry))
        # Stale items of rescheduled entries pile up; rebuild before they outnumber live ones.
        if len(heap) > 2 * self._size + 64:
            self._heap = [item for item in heap if item[2]._seq == item[1]]
            heapq.heapify(self._heap)

    def expire(self, now: float) -> list[PitEntry]:
        """Erase and return every entry whose expiry is <= ``now``, earliest first."""
        heap = self._heap
        out: list[PitEntry] = []
        while heap and heap[0][0] <= now:
            _, seq, entry = heapq.heappop(heap)
            if entry._seq == seq:
                self._remove(entry)
                out.append(entry)
        if out:
            self._counters["pit.expired"] += len(out)
        return out

    def next_expiry(self) -> float:
        """When the earliest scheduled entry expires (inf if none): when to call :meth:`expire`."""
        heap = self._heap
        while heap and heap[0][2]._seq != heap[0][1]:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def erase(self, entry: PitEntry) -> None:
        """Remove ``entry`` now (no-op if it is already gone)."""
        if entry._live:
            self._remove(entry)

    def _remove(self, entry: PitEntry) -> None:
        bucket = self._by_name[entry.name]
        if len(bucket) == 1:
            del self._by_name[entry.name]
        else:
            bucket.remove(entry)
        entry._live = False
        entry._seq = -1  # invalidates its heap item
        self._size -= 1
        self.shares.release(entry.owner, entry.owner_local)
        if entry.can_be_prefix:
            self._n_cbp -= 1
        if entry._is_digest:
            self._n_digest -= 1
        self._counters["pit.erase"] += 1

    def remove_face(self, face_id: int) -> int:
        """Drop ``face_id``'s records everywhere (the face went down).  Entries that lose a record
        and are left with no in-record (nobody to answer) are erased; return how many."""
        erased = 0
        for entry in list(self):
            touched = entry.in_records.pop(face_id, None) is not None
            touched = entry.out_records.pop(face_id, None) is not None or touched
            if touched and not entry.in_records:
                self._remove(entry)
                erased += 1
        return erased

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[PitEntry]:
        for bucket in list(self._by_name.values()):
            yield from bucket
