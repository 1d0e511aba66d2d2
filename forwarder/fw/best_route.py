"""best-route (NFD ``BestRouteStrategy`` v5): one upstream at a time, the cheapest that may take
the Interest; retransmissions suppressed exponentially per PIT entry and, when allowed, sent to
an upstream not tried yet (else the one tried earliest), so a consumer's retransmission probes
the alternatives instead of hammering the first route."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mypy_extensions import mypyc_attr

from forwarder.fw.retx_suppression import RetxDecision, RetxSuppressionExponential
from forwarder.fw.strategy import InterestContext, Strategy

if TYPE_CHECKING:
    from forwarder.face_api import FaceLike
    from forwarder.fw.forwarder_base import ForwarderBase
    from forwarder.table.pit import PitEntry


@mypyc_attr(allow_interpreted_subclasses=True)  # the usual base of a strategy of one's own
class BestRouteStrategy(Strategy):
    name = "best-route"
    version = 5

    def __init__(self, fw: ForwarderBase, parameters: Mapping[str, str] | None = None) -> None:
        super().__init__(fw, parameters)
        self.retx = RetxSuppressionExponential()

    def after_receive_interest(self, entry: PitEntry, ctx: InterestContext) -> None:
        decision = self.retx.decide_per_pit_entry(entry, ctx.now, ctx.joined)
        if decision is RetxDecision.SUPPRESS:
            self.counters["fw.retx_suppressed"] += 1
            return
        if decision is RetxDecision.JOINED:
            self.counters["fw.joined_pending"] += 1
            return
        faces = self.faces
        ingress_id = ctx.ingress.face_id
        nonlocal_ok = ctx.nonlocal_ok
        if decision is RetxDecision.NEW:
            for nh in self.nexthops(entry):
                face = faces.get(nh.face_id)
                if face is not None and nh.face_id != ingress_id and (nonlocal_ok or face.is_local):
                    self.send_interest(entry, face, ctx)
                    return
            self.no_upstream(entry, ctx, new=True)
            return
        # An allowed retransmission: first eligible upstream without a live out-record, else the
        # eligible one whose Interest went out earliest.
        now = ctx.now
        out_records = entry.out_records
        earliest: FaceLike | None = None
        earliest_sent = float("inf")
        for nh in self.nexthops(entry):
            face = faces.get(nh.face_id)
            if face is None or not ctx.is_eligible(face):
                continue
            out = out_records.get(nh.face_id)
            if out is None or out.expiry <= now:
                self.send_interest(entry, face, ctx)
                return
            if out.last_sent < earliest_sent:
                earliest, earliest_sent = face, out.last_sent
        if earliest is None:
            self.no_upstream(entry, ctx, new=False)
            return
        self.send_interest(entry, earliest, ctx)
