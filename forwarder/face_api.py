"""The two interfaces between the sans-IO forwarding core and the faces.

``fw/`` talks to faces only through :class:`FaceLike`; faces talk to ``fw/`` only through
:class:`PacketSink`.  Unit tests plug fakes into either side.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from icn.wire.lp import LpView

# One counter bag per daemon, shared by every table, pipeline and face; keys are
# "<component>.<event>", e.g. "pit.refused_full", "fw.drop_hop_limit", "face.malformed".
Counters = Counter


class FaceLike(Protocol):
    """What the forwarding pipelines need from a face."""

    face_id: int
    # local scope: Unix, in-memory, or TCP/UDP whose peer is on loopback. /localhost packets only
    # cross local faces.
    is_local: bool

    def send_interest(self, wire: bytes) -> None:
        """Send an Interest upstream (never with a PitToken)."""

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        """Send Data downstream, echoing the downstream's PitToken if it gave one."""

    def send_nack(self, interest_wire: bytes, reason: int, pit_token: bytes | None = None) -> None:
        """Send a network Nack carrying the downstream's own Interest."""


class PacketSink(Protocol):
    """What faces call when a network packet has been read, unwrapped and reassembled.

    ``lp`` is the LpPacket header that carried the packet (None for a bare packet).  The sink
    parses the packet itself and drops and counts anything malformed: it never raises.
    """

    def receive_interest(self, face_id: int, wire: bytes, lp: LpView | None) -> None: ...

    def receive_data(self, face_id: int, wire: bytes, lp: LpView | None) -> None: ...

    def receive_nack(self, face_id: int, interest_wire: bytes, lp: LpView) -> None: ...
