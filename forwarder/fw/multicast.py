"""multicast (NFD ``MulticastStrategy`` v5): every eligible upstream gets the Interest, with
retransmissions suppressed per upstream so one slow face does not hold back the others."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from forwarder.fw.retx_suppression import RetxDecision, RetxSuppressionExponential
from forwarder.fw.strategy import InterestContext, Strategy
from icn.wire import tlv_types as T

if TYPE_CHECKING:
    from forwarder.fw.forwarder_base import ForwarderBase
    from forwarder.table.pit import PitEntry


class MulticastStrategy(Strategy):
    name = "multicast"
    version = 5

    def __init__(self, fw: ForwarderBase, parameters: Mapping[str, str] | None = None) -> None:
        super().__init__(fw, parameters)
        self.retx = RetxSuppressionExponential()

    def after_receive_interest(self, entry: PitEntry, ctx: InterestContext) -> None:
        retx = self.retx
        faces = self.faces
        now = ctx.now
        sent = 0
        suppressed = False
        for nh in self.nexthops(entry):
            face = faces.get(nh.face_id)
            if face is None:
                continue
            decision = retx.decide_per_upstream(entry, nh.face_id, now)
            if decision is RetxDecision.SUPPRESS:
                self.counters["fw.retx_suppressed"] += 1
                suppressed = True
                continue
            if not ctx.is_eligible(face):
                continue
            self.send_interest(entry, face, ctx)
            if decision is RetxDecision.FORWARD:
                retx.increment_upstream_interval(entry, nh.face_id)
            sent += 1
        if sent or suppressed:
            return
        # Nowhere to go and nothing held back: tell the downstream now rather than let it time out.
        self.counters["fw.nack_no_route"] += 1
        self.send_nack(entry, ctx.ingress.face_id, T.NACK_NO_ROUTE)
        if not self.has_pending_out_records(entry, now):
            self.reject_pending_interest(entry)
