"""multipath: one prefix's Interests spread over its equal-cost next hops, by name.

The spread is per name, not per packet or per flow: the name's last components choose the next
hop, so every Interest for one name (a consumer's retransmissions, and every worker's Interest
for the same chunk of a collective) takes the same path and they still meet in PITs, while the
chunks of one transfer split across the paths.  This is splitting at the application layer, by
chunk name, where packet spraying splits a flow's packets across paths in the switches.

Equal-cost means the FIB next hops with the lowest cost (the FIB keeps them in (cost, face id)
order).  The choice is ``key % n`` over those ``n`` hops in that order, so two forwarders that
should agree on a chunk's path (the racks of a fabric, each with a face to every spine) must
have their hops to the same places in the same order: give them equal costs and create the faces
in the same order, or the same chunk may go to different places from each.

The key: the last ``components~K`` components of the name (default: the whole name), with
CRC-32 (the same in every process, unlike Python's ``hash``).  When the last component is a
number (a decimal generic component, a segment or a sequence number: a chunk's index) the key is
the hash of the components before it plus that number, so consecutive chunks go round-robin and
a transfer of ``m`` chunks splits exactly evenly, without a hash's variance (64 chunks over two
paths by hash alone: about 32 +- 4 each).

Retransmissions allowed by the exponential suppression go to the same hop.  A Nack from a hop
sends the Interest on to another not tried yet: the next equal-cost hop in the same order, then
the costlier ones; when every hop has Nacked, the downstreams get the least severe reason.  A
hop that is the Interest's ingress, or a non-local face the Interest may not leave by, is
skipped the same way.  A hop that stays silent is not detected (asf measures that); a face that
goes down leaves the FIB, and the names then spread over the hops left.

State: none on the instance; the PIT entry keeps the Interest's context for a fail-over.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from forwarder.fw.retx_suppression import RetxDecision, RetxSuppressionExponential
from forwarder.fw.strategy import InterestContext, Strategy
from icn.errors import ConfigError
from icn.wire import tlv_types as T

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from forwarder.face_api import FaceLike
    from forwarder.fw.forwarder_base import ForwarderBase
    from forwarder.table.fib import NextHop
    from forwarder.table.pit import PitEntry

_INFO = "multipath"  # strategy_info key: the InterestContext a fail-over sends
COMPONENTS_MAX = 64
_NUMBER_TYPES = (T.COMP_SEGMENT, T.COMP_SEQUENCE_NUM)
_GOLDEN = 0x9E3779B1  # Fibonacci hashing: spreads CRC-32's low bits over the word


def component_number(component: bytes) -> int | None:
    """The number a name component carries (decimal generic, segment or sequence number), or
    None."""
    if len(component) < 3 or component[1] != len(component) - 2:
        return None  # also rules out multi-octet types and lengths: no such numbers here
    value = component[2:]
    if component[0] == T.COMP_GENERIC:
        return int(value) if len(value) <= 18 and value.isdigit() else None
    if component[0] in _NUMBER_TYPES and len(value) in (1, 2, 4, 8):
        return int.from_bytes(value, "big")
    return None


def equal_cost(nexthops: Sequence[NextHop]) -> int:
    """How many of ``nexthops`` (cheapest first, non-empty) share the lowest cost."""
    cheapest = nexthops[0].cost
    n = 1
    while n < len(nexthops) and nexthops[n].cost == cheapest:
        n += 1
    return n


def spread_key(name: bytes, name_ends: Sequence[int], components: int | None) -> int:
    """What chooses the next hop for ``name``: see the module's docstring."""
    count = len(name_ends)
    if count == 0:
        return 0
    take = count if components is None else min(components, count)
    start = name_ends[count - take - 1] if take < count else 0
    last = name_ends[count - 2] if count > 1 else 0
    number = component_number(name[last:])
    if number is None:
        return (zlib.crc32(name[start:]) * _GOLDEN) & 0xFFFFFFFF
    before = (zlib.crc32(name[start:last]) * _GOLDEN) & 0xFFFFFFFF if start < last else 0
    return before + number


class MultipathStrategy(Strategy):
    name = "multipath"
    version = 1

    def __init__(self, fw: ForwarderBase, parameters: Mapping[str, str] | None = None) -> None:
        super().__init__(fw, parameters)
        given = self.parameters.get("components")
        self.components = None if given is None else int(given)
        self.retx = RetxSuppressionExponential()

    @classmethod
    def check_parameters(cls, parameters: Mapping[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in parameters.items():
            if key != "components":
                raise ConfigError(
                    f"strategy multipath has no parameter {key!r}; use components~2 (hash the "
                    "last 2 name components; default: the whole name)"
                )
            if not (value.isdigit() and 1 <= int(value) <= COMPONENTS_MAX):
                raise ConfigError(
                    f"strategy multipath: components~{value} must be an integer in "
                    f"1..{COMPONENTS_MAX}, e.g. components~2"
                )
            out[key] = str(int(value))
        return out

    # -- triggers ------------------------------------------------------------------------------

    def after_receive_interest(self, entry: PitEntry, ctx: InterestContext) -> None:
        decision = self.retx.decide_per_pit_entry(entry, ctx.now, ctx.joined)
        if decision is RetxDecision.SUPPRESS:
            self.counters["fw.retx_suppressed"] += 1
            return
        if decision is RetxDecision.JOINED:
            self.counters["fw.joined_pending"] += 1
            return
        entry.strategy_info[_INFO] = ctx
        nacked = entry.out_records if decision is RetxDecision.FORWARD else None
        for face in self._in_order(entry, ctx):
            # an allowed retransmission goes where the name says, unless that hop Nacked it
            if nacked is not None:
                out = nacked.get(face.face_id)
                if out is not None and out.nack_reason is not None:
                    continue
            self.send_interest(entry, face, ctx)
            return
        self.no_upstream(entry, ctx, decision is RetxDecision.NEW)

    def after_receive_nack(self, entry: PitEntry, ingress_id: int, reason: int, now: float) -> None:
        ctx = entry.strategy_info.get(_INFO)
        if isinstance(ctx, InterestContext) and any(
            rec.expiry > now for rec in entry.in_records.values()
        ):
            tried = entry.out_records
            for face in self._in_order(entry, ctx):
                if face.face_id not in tried:
                    self.counters["fw.multipath_failover"] += 1
                    ctx.now = now
                    self.send_interest(entry, face, ctx)
                    return
        self.process_nack(entry)

    # -- choice --------------------------------------------------------------------------------

    def choose(self, name: bytes, name_ends: Sequence[int], nexthops: Sequence[NextHop]) -> int:
        """Index into ``nexthops`` (cheapest first, non-empty) of the hop ``name`` goes to."""
        n = equal_cost(nexthops)
        return 0 if n == 1 else spread_key(name, name_ends, self.components) % n

    def _in_order(self, entry: PitEntry, ctx: InterestContext) -> Iterator[FaceLike]:
        """The eligible hops for ``entry`` in the order it tries them: the one its name chooses,
        the other equal-cost ones after it (wrapping around), then the costlier ones."""
        nexthops = self.nexthops(entry)
        if not nexthops:
            return
        n = equal_cost(nexthops)
        first = self.choose(entry.name, entry.name_ends, nexthops)
        order = [*range(first, n), *range(first), *range(n, len(nexthops))]
        faces = self.faces
        for i in order:
            face = faces.get(nexthops[i].face_id)
            if face is not None and ctx.is_eligible(face):
                yield face
