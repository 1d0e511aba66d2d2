"""Reflexive forwarding rules (docs/design.md section 5; the IRTF reflexive forwarding draft's
template-PIT design), called from the pipelines.

A Trigger Interest (TI, name ending in a Reflexive Name Segment) installs reverse state keyed by
that segment, then goes upstream by FIB and strategy like any Interest.  A Reflexive Interest
(RI, name starting with the segment) is only forwarded while such state lives, and then only to
the TI's downstream faces, never by FIB: the consumer has no route, and anyone else's Interest
must not reach it (§5.7 #2).  Each RI keeps the TI alive 1.5 times its own lifetime, so the
exchange survives the extra round trips (§5.7 #1).  Reflexive Data is cached only while its
state lives, and purged with it (the table calls ``ContentStore.erase`` on the key).
"""

from __future__ import annotations

from forwarder.fw.forwarder_base import ForwarderBase
from forwarder.fw.strategy import InterestContext
from forwarder.table.pit import PitEntry
from icn.wire import tlv_types as T
from icn.wire.packet import DataView
from icn.wire.reflexive import LIFETIME_EXTENSION


class ReflexivePipeline(ForwarderBase):
    """The reflexive steps of the Interest and Data pipelines (mixed into both)."""

    def _install_trigger(self, entry: PitEntry, key: bytes) -> bool:
        """Give the TI ``entry`` its reverse state.  When the table is full (or the TI's face or
        non-local faces used their share) the TI is refused:
        Nacked (Congestion: try later) to its downstreams and its entry rejected; False."""
        state = self.rft.insert(key, entry)
        if state is None:
            self.counters["fw.drop_reflexive_full"] += 1
            for face_id in list(entry.in_records):
                self.refused_by_face[face_id] += 1
                self.send_nack(entry, face_id, T.NACK_CONGESTION)
            self.reject(entry)
            return False
        if state.entry is entry:
            entry.reflexive_key = key
        else:
            # Another pending TI holds this RNP; RNPs are single-use, the first keeps the path.
            self.counters["fw.reflexive_key_in_use"] += 1
        return True

    def _forward_reflexive(self, entry: PitEntry, ti: PitEntry, ctx: InterestContext) -> None:
        """Send the RI of ``entry`` to the downstreams still waiting on the TI ``ti`` (not back
        to the RI's ingress), after extending their wait and the TI's expiry."""
        now = ctx.now
        until = now + LIFETIME_EXTENSION * 0.001 * ctx.lifetime
        ingress_id = ctx.ingress.face_id
        faces = self.faces
        waiting = sent = False
        for face_id, rec in ti.in_records.items():
            if rec.expiry <= now:
                continue  # that downstream gave up on the TI: not revived, gets no RI
            waiting = True
            if rec.expiry < until:
                rec.expiry = until
            face = faces.get(face_id)
            if face_id == ingress_id or face is None or not ctx.is_eligible(face):
                continue
            self.send_interest(entry, face, ctx)
            sent = True
        if waiting and ti.expiry < until:
            self.pit.set_expiry(ti, until)
        if not sent:
            self.counters["fw.drop_reflexive_no_face"] += 1
            if not entry.out_records:
                self.reject(entry)  # nothing pending upstream: nobody will answer it
            return
        self.counters["fw.reflexive_forwarded"] += 1

    def _may_cache_reflexive(self, dv: DataView) -> bool:
        """Reflexive Data goes into the CS only while its exchange lives (marked, so its end
        purges it): never shared with a later exchange or another consumer (§5.4)."""
        state = self.rft.find(dv.name[: dv.name_ends[0]])
        if state is None:
            self.counters["fw.reflexive_data_not_cached"] += 1
            return False
        state.cached = True
        return True
