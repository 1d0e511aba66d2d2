"""Incoming Nack pipeline (NFD ``Forwarder::onIncomingNack``).

A Nack counts only if it answers the Interest we sent on that face: same PIT entry, and the
nonce of our out-record there.  Anything else (a late Nack for an older nonce, a forged one) is
dropped, so a stale or spoofed Nack cannot cut short a live Interest.  What happens next is the
strategy's choice (wait for other upstreams, or Nack the downstreams).
"""

from __future__ import annotations

from forwarder.fw.reflexive import ReflexivePipeline
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.lp import LpView
from icn.wire.packet import parse_interest

_KNOWN_REASONS = frozenset((T.NACK_CONGESTION, T.NACK_DUPLICATE, T.NACK_NO_ROUTE))


class NackPipeline(ReflexivePipeline):
    def receive_nack(self, face_id: int, interest_wire: bytes, lp: LpView) -> None:
        counters = self.counters
        counters["fw.in_nack"] += 1
        if face_id not in self.faces:
            counters["fw.drop_unknown_face"] += 1
            return
        try:
            iv = parse_interest(interest_wire)
        except DecodeError:
            counters["fw.drop_malformed_nack"] += 1
            return
        entry = self.pit.find(iv)
        if entry is None:
            counters["fw.drop_nack_no_pit"] += 1
            return
        out = entry.out_records.get(face_id)
        if out is None or iv.nonce is None or out.nonce != iv.nonce:
            counters["fw.drop_nack_nonce"] += 1
            return
        reason = lp.nack_reason
        # An absent or unknown reason is None, the most severe (NDNLPv2).
        out.nack_reason = reason if reason in _KNOWN_REASONS else T.NACK_NONE
        now = self.clock()
        strategy = self.strategy_choice.find(entry.name, entry.name_ends)
        strategy.after_receive_nack(entry, face_id, out.nack_reason, now)
        if not strategy.has_pending_out_records(entry, now):
            # Nothing more can come from upstream (the strategy sent nowhere else): the entry
            # ends at the next tick unless the strategy ended it already.
            self.pit.set_expiry(entry, now)
