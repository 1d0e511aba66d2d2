"""Upstreams still out when another one answered: their Data will come late, or never.

A strategy that sends one Interest to several upstreams (a probe, a clone) sees the first Data
satisfy the PIT entry, which then leaves the table; the others' Data arrive after it and match
nothing.  The PIT forgets them, so the strategy remembers them here, keyed by the Interest's
name and the upstream's face: a late answer then measures that upstream (its RTT counts, though
it lost the race) and is counted as late, not as unsolicited Data.

Bounded: at most ``max_records`` (the oldest out first, counted as "fw.asf_late_evicted"), each
kept until its out-record would have expired.  An upstream that never answers is not a failure
here: the winner's Data may have ended the exchange it needed (a RICE server pulling arguments
through a Trigger Interest that is gone), and a cancelled loser need not answer.
"""

from __future__ import annotations

from collections import Counter

from forwarder.fw.nexthop_stats import NextHopStats
from icn.wire.packet import DataView


class LateRecord:
    """One upstream still out: when the Interest went to it, until when it may answer, its
    stats, whether it was a clone, and whether its RTT may be sampled (sent once: Karn)."""

    __slots__ = ("can_be_prefix", "clone", "expiry", "measured", "sent", "stats")

    def __init__(
        self,
        sent: float,
        expiry: float,
        stats: NextHopStats,
        *,
        clone: bool,
        measured: bool,
        can_be_prefix: bool,
    ) -> None:
        self.sent = sent
        self.expiry = expiry
        self.stats = stats
        self.clone = clone
        self.measured = measured
        self.can_be_prefix = can_be_prefix


class LateAnswers:
    """(Interest name, face id) -> :class:`LateRecord`, bounded, in insertion order."""

    __slots__ = ("_counters", "_n_cbp", "_records", "max_records")

    def __init__(self, max_records: int, counters: Counter[str] | None = None) -> None:
        if max_records < 1:
            raise ValueError("max_records must be >= 1")
        self.max_records = max_records
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._records: dict[tuple[bytes, int], LateRecord] = {}
        self._n_cbp = 0  # CanBePrefix records: Data must probe its name's prefixes too

    def add(self, name: bytes, face_id: int, record: LateRecord) -> None:
        records = self._records
        key = (name, face_id)
        old = records.pop(key, None)
        if old is not None:
            self._forget(old)
        records[key] = record
        if record.can_be_prefix:
            self._n_cbp += 1
        if len(records) > self.max_records:
            oldest = next(iter(records))
            self._forget(records.pop(oldest))
            self._counters["fw.asf_late_evicted"] += 1

    def pop(self, data: DataView, face_id: int, now: float) -> LateRecord | None:
        """The record ``data`` from ``face_id`` answers, removed; None if none (or it expired:
        an answer after its Interest's lifetime is unsolicited, as NFD sees it)."""
        records = self._records
        if not records:
            return None
        name = data.name
        key = (name, face_id)
        rec = records.get(key)
        if rec is None and self._n_cbp:
            for end in data.name_ends[:-1]:
                candidate = records.get((name[:end], face_id))
                if candidate is not None and candidate.can_be_prefix:
                    key, rec = (name[:end], face_id), candidate
                    break
        if rec is None:
            return None
        del records[key]
        self._forget(rec)
        return rec if rec.expiry > now else None

    def expire(self, now: float) -> int:
        """Drop expired records from the front (insertion order is roughly expiry order; one
        with a longer lifetime holds the scan, and the bound still holds); return how many."""
        records = self._records
        n = 0
        while records:
            key = next(iter(records))
            rec = records[key]
            if rec.expiry > now:
                break
            del records[key]
            self._forget(rec)
            n += 1
        return n

    def _forget(self, rec: LateRecord) -> None:
        if rec.can_be_prefix:
            self._n_cbp -= 1

    def __len__(self) -> int:
        return len(self._records)
