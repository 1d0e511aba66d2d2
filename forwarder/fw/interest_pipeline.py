"""Incoming Interest pipeline (NFD ``Forwarder::onIncomingInterest``).

Order matters and follows NFD: nonce, HopLimit and scope checks first (cheap, no table work),
then the Dead Nonce List and the PIT for loops, then the content store only for an Interest
nobody else is waiting for, then the in-record and the strategy.  Reflexive Interests need live
reverse state before any table is touched, and bypass FIB and strategy (``reflexive``).
"""

from __future__ import annotations

from os import urandom

from forwarder.fw.data_pipeline import DataPipeline
from forwarder.fw.forwarder_base import LOCALHOP, LOCALHOST
from forwarder.fw.strategy import InterestContext
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.lp import LpView
from icn.wire.packet import parse_interest

COMP_REFLEXIVE = T.COMP_REFLEXIVE


class InterestPipeline(DataPipeline):
    def receive_interest(self, face_id: int, wire: bytes, lp: LpView | None) -> None:
        counters = self.counters
        counters["fw.in_interest"] += 1
        face = self.faces.get(face_id)
        if face is None:
            counters["fw.drop_unknown_face"] += 1
            return
        try:
            iv = parse_interest(wire)
            nonce = iv.nonce
            if nonce is None:
                # Loop detection needs a nonce; NFD adds one to an Interest that has none.
                nonce = urandom(4)
                wire = iv.with_nonce(nonce)
                iv = parse_interest(wire)
                counters["fw.nonce_added"] += 1
        except DecodeError:
            counters["fw.drop_malformed_interest"] += 1
            return
        hop = iv.hop_limit
        if hop == 0:
            counters["fw.drop_hop_limit"] += 1
            return
        name = iv.name
        ingress_local = face.is_local
        is_localhost = name.startswith(LOCALHOST)
        if is_localhost and not ingress_local:
            counters["fw.drop_scope"] += 1
            return
        reverse = None
        if name[0] == COMP_REFLEXIVE:  # an RI (type 59 is one octet; names are never empty)
            # An RI without a live TI (a guessed RNP, or its exchange is over) must not reach
            # anyone: dropped silently, before it costs any table work.
            reverse = self.rft.find(name[: iv.name_ends[0]])
            if reverse is None:
                counters["fw.drop_reflexive_no_state"] += 1
                return
        pit_token = lp.pit_token if lp is not None else None
        now = self.clock()
        if self.dnl.has(name, nonce, now):
            counters["fw.loop_dnl"] += 1
            self._nack_loop(face_id, wire, pit_token)
            return

        pit = self.pit
        entry = pit.find(iv)
        joined = False
        if entry is not None:
            own = entry.in_records.get(face_id)
            if own is not None and own.nonce == nonce:
                # The same point-to-point downstream sent the same Interest again: a
                # retransmission, not a loop (as NFD's onIncomingInterest decides).
                counters["fw.retransmission"] += 1
            elif entry.has_nonce(nonce, face_id):
                counters["fw.loop_pit"] += 1
                self._nack_loop(face_id, wire, pit_token)
                return
        if entry is None or not entry.in_records:
            # Only an Interest nobody is waiting for looks in the CS (NFD).  Looking before the
            # PIT insert spares a hit the insert and erase, and a full PIT does not stop hits.
            cs = self.cs
            if cs.serve:
                data = cs.lookup(iv, now)
                if data is not None:
                    counters["fw.cs_hit"] += 1
                    counters["fw.cs_hit_bytes"] += len(data)
                    counters["fw.interest_satisfied"] += 1
                    face.send_data(data, pit_token, 0)
                    counters["fw.out_data"] += 1
                    return
            if entry is None:
                entry, _ = pit.find_or_insert(iv, face_id, ingress_local)
                if entry is None:
                    counters["fw.drop_pit_full"] += 1
                    self.refuse(face, wire, pit_token)
                    return
        elif face_id not in entry.in_records or len(entry.in_records) > 1:
            counters["fw.aggregated"] += 1
            joined = face_id not in entry.in_records

        lifetime = iv.lifetime
        if lifetime > self.max_lifetime_ms:
            # Held no longer than the bound; the wire goes upstream as it came (each hop applies
            # its own bound, and re-encoding would cost every forwarded Interest a copy).
            lifetime = self.max_lifetime_ms
            counters["fw.lifetime_capped"] += 1
        rec = entry.insert_in_record(face_id, nonce, now, lifetime, pit_token, wire)
        in_records = entry.in_records
        expiry = rec.expiry
        if len(in_records) > 1:
            expiry = max(r.expiry for r in in_records.values())
        pit.set_expiry(entry, expiry)
        if entry.reflexive_key is None:
            # A TI (last component a Reflexive Name Segment) gets its reverse state now that its
            # entry and in-record exist; inline, as every Interest passes here.
            ends = iv.name_ends
            start = ends[-2] if len(ends) > 1 else 0
            if name[start] == COMP_REFLEXIVE and not self._install_trigger(entry, name[start:]):
                return

        # What goes upstream: HopLimit decremented (a new copy), never the PitToken.  With the
        # last hop used up, or a scoped name, only local faces (apps) may still receive it.
        if hop is None:
            out_wire = wire
            nonlocal_ok = True
        else:
            out_wire = iv.with_hop_limit(hop - 1)
            nonlocal_ok = hop > 1
        if is_localhost or (not ingress_local and name.startswith(LOCALHOP)):
            nonlocal_ok = False
        ctx = InterestContext(face, out_wire, nonce, lifetime, nonlocal_ok, now, joined)
        if reverse is not None:
            self._forward_reflexive(entry, reverse.entry, ctx)
            return

        if lp is not None and lp.next_hop_face_id is not None:
            if ingress_local:
                # An app chose the upstream itself (NFD local field): no strategy.
                counters["fw.next_hop_face_id"] += 1
                nh_face = self.faces.get(lp.next_hop_face_id)
                if nh_face is None:
                    counters["fw.drop_next_hop_unknown"] += 1
                    return
                self.send_interest(entry, nh_face, ctx)
                return
            # Local fields are not honoured from the network: forward as usual.
            counters["fw.ignored_next_hop_face_id"] += 1
        self.strategy_choice.find(name, iv.name_ends).after_receive_interest(entry, ctx)

    def _nack_loop(self, face_id: int, wire: bytes, pit_token: bytes | None) -> None:
        """Interest loop: all our faces are point-to-point, so tell the sender (Nack Duplicate,
        carrying its own Interest) instead of letting it wait for a timeout.  No PIT state."""
        face = self.faces[face_id]
        face.send_nack(wire, T.NACK_DUPLICATE, pit_token)
        self.counters["fw.out_nack"] += 1
