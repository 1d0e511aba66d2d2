"""Incoming Data pipeline (NFD ``Forwarder::onIncomingData``).

Data goes only where an Interest asked for it: to every downstream of every matching PIT entry,
once per downstream even when several entries match (CanBePrefix and exact Interests for the
same Data), each copy with that downstream's own PitToken.  The matched entries are satisfied and
leave the PIT at once; a strategy watching one hears of it first.  Data matching no entry is
offered to the strategies (one may have sent the Interest to several upstreams and be waiting
for the slower ones' late answers), then dropped.
"""

from __future__ import annotations

from forwarder.fw.forwarder_base import LOCALHOST
from forwarder.fw.nack_pipeline import NackPipeline
from forwarder.fw.strategy import watcher_of
from forwarder.table.pit import PitEntry
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.lp import LpView
from icn.wire.packet import parse_data
from icn.wire.reflexive import REFLEXIVE_FIRST_OCTET


class DataPipeline(NackPipeline):
    def receive_data(self, face_id: int, wire: bytes, lp: LpView | None) -> None:
        counters = self.counters
        counters["fw.in_data"] += 1
        face = self.faces.get(face_id)
        if face is None:
            counters["fw.drop_unknown_face"] += 1
            return
        try:
            dv = parse_data(wire)
        except DecodeError:
            counters["fw.drop_malformed_data"] += 1
            return
        is_localhost = dv.name.startswith(LOCALHOST)
        if is_localhost and not face.is_local:
            counters["fw.drop_scope"] += 1
            return
        matches = self.pit.find_matches(dv)
        if not matches:
            # NFD's default unsolicited-Data policy (drop-all): caching what nobody asked for
            # would let any neighbour fill our CS.  A late answer a strategy expected is
            # dropped too, but counted by that strategy instead.
            now = self.clock()
            for strategy in self._strategies.values():
                if strategy.after_receive_unsolicited_data(face_id, dv, now):
                    return
            counters["fw.drop_unsolicited_data"] += 1
            return
        now = self.clock()
        if lp is None:
            mark = 0
            no_cache = False
        else:
            mark = lp.congestion_mark
            no_cache = lp.cache_policy == T.CACHE_POLICY_NO_CACHE
            if no_cache:
                counters["fw.cs_no_cache"] += 1
        if not no_cache and (dv.name[:1] != REFLEXIVE_FIRST_OCTET or self._may_cache_reflexive(dv)):
            self.cs.insert(dv, now)

        faces = self.faces
        sent: set[int] | None = set() if len(matches) > 1 else None
        for entry in matches:
            for down_id, rec in entry.in_records.items():
                # Not back to the face it came from (point-to-point), not to a downstream that
                # has given up waiting, and once only per downstream.
                if down_id == face_id or rec.expiry <= now:
                    continue
                if sent is not None:
                    if down_id in sent:
                        continue
                    sent.add(down_id)
                down = faces.get(down_id)
                if down is None:
                    continue
                if is_localhost and not down.is_local:
                    counters["fw.drop_out_scope"] += 1
                    continue
                down.send_data(wire, rec.pit_token, mark)
                counters["fw.out_data"] += 1
            if entry.strategy_info:  # inline test: most entries have no strategy state
                watcher = watcher_of(entry)
                if watcher is not None:
                    watcher.before_satisfy_interest(entry, face_id, now, dv)
            self._satisfy(entry, face_id, dv.freshness, now)

    def _satisfy(self, entry: PitEntry, face_id: int, freshness: int, now: float) -> None:
        entry.satisfied = True
        entry.data_freshness = freshness
        # The upstream that answered is done; the nonce we sent it goes to the DNL only under
        # the MustBeFresh rule (see finalize), as the rest do when the entry is finalized.
        out = entry.out_records.pop(face_id, None)
        if out is not None and entry.must_be_fresh and freshness < self.dnl_lifetime_ms:
            self.dnl.add(entry.name, out.nonce, now)
        self.pit.erase(entry)
        self.finalize(entry, now)
