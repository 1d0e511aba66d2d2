"""NDNLPv2 link service: what a face does between the forwarder and a transport.

Incoming, each link packet is a bare Interest/Data or an LpPacket.  An LpPacket is unwrapped,
reassembled if fragmented, and handed to the sink with its header (PitToken, CongestionMark,
NextHopFaceId, CachePolicy) as an :class:`~icn.lp.LpView`; a Nack LpPacket becomes
``receive_nack``.  Everything malformed is dropped and counted ("face.<reason>"): bad input from
the network never raises into the event loop.

Outgoing, packets go bare when there is no header to carry (what python-ndn and NFD expect),
as ``LpPacket{PitToken, CongestionMark, Fragment}`` for Data with a token or mark, and as
``LpPacket{Nack, Fragment=Interest}`` for Nacks.  A transport with a finite MTU (UDP) gets
fragments when a packet does not fit; stream transports have no MTU and never fragment.

Each face has a largest packet (its transport's ``max_packet``: 8800 bytes on UDP and TCP, 4 MiB
on Unix and in-memory faces).  A larger packet is neither sent nor fragmented but dropped and
counted as "face.drop_oversize" (a packet from a local app that cannot leave the host); a larger
one received, whole or reassembled, is dropped as "face.oversize".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from forwarder.face_api import Counters, PacketSink
from icn import tlv_types as T
from icn.errors import DecodeError, EncodeError
from icn.fragment import Fragmenter, Reassembler
from icn.lp import LpView, encode_lp, encode_nack, parse_lp
from icn.tlv import read_tl

log = logging.getLogger(__name__)


class FaceStats:
    """Per-face packet counters, the NFD FaceStatus fields (bytes are counted by the transport)."""

    __slots__ = (
        "n_in_data",
        "n_in_interests",
        "n_in_nacks",
        "n_out_data",
        "n_out_interests",
        "n_out_nacks",
    )

    def __init__(self) -> None:
        self.n_in_interests = 0
        self.n_in_data = 0
        self.n_in_nacks = 0
        self.n_out_interests = 0
        self.n_out_data = 0
        self.n_out_nacks = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


def _nowhere(_wire: bytes) -> None:
    """Output used until the face connects the link service to its transport."""


class LinkService:
    """NDNLPv2 framing, fragmentation and reassembly for one face."""

    def __init__(
        self,
        *,
        counters: Counters[str],
        mtu: int | None = None,
        max_packet: int = T.MAX_PACKET_SIZE,
        is_local: bool = False,
        clock: Callable[[], float] = time.monotonic,
        reassembly_timeout: float = 0.5,
    ) -> None:
        self.face_id = 0
        self.sink: PacketSink | None = None
        # where encoded link packets go: the transport's send, or a shaper in front of it
        self.output: Callable[[bytes], None] = _nowhere
        self.stats = FaceStats()
        self.is_local = is_local
        self.max_packet = max_packet
        self._max_frame = max_packet + T.LP_HEADER_ROOM  # a packet in an LpPacket, received
        self._counters = counters
        self._clock = clock
        self._reassembly_timeout = reassembly_timeout
        self._fragmenter = Fragmenter(mtu) if mtu else None
        # created on the first fragment: most faces never see one
        self._reassembler: Reassembler | None = None
        self._warned = False

    # ---- incoming -------------------------------------------------------------------------

    def receive(self, wire: bytes) -> None:
        """One link packet from the transport.  Never raises."""
        try:
            self._receive(wire)
        except DecodeError:
            self._counters["face.malformed"] += 1
        except Exception:
            # a bug (ours or the sink's), not bad input; report it once per face, count always
            self._counters["face.receive_error"] += 1
            if not self._warned:
                self._warned = True
                log.warning("face %d: error while receiving a packet", self.face_id, exc_info=True)

    def _receive(self, wire: bytes) -> None:
        end = len(wire)
        if end > self._max_frame:
            self._counters["face.oversize"] += 1
            return
        typ, _, vend = read_tl(wire, 0, end)
        if vend != end:
            raise DecodeError("bytes after the packet's TLV")
        sink = self.sink
        if sink is None:
            self._counters["face.no_sink"] += 1
        elif typ == T.INTEREST:
            self.stats.n_in_interests += 1
            sink.receive_interest(self.face_id, wire, None)
        elif typ == T.DATA:
            self.stats.n_in_data += 1
            sink.receive_data(self.face_id, wire, None)
        elif typ == T.LP_PACKET:
            self._receive_lp(parse_lp(wire), sink)
        else:
            self._counters["face.unknown_type"] += 1

    def _receive_lp(self, lp: LpView, sink: PacketSink) -> None:
        if lp.fragment is None:
            # legal (Ack-only or idle LpPacket) but carries nothing for the forwarder
            self._counters["face.lp_no_fragment"] += 1
            return
        if lp.frag_count == 1:
            packet = lp.fragment
        else:
            whole = self._reassemble(lp)
            if whole is None:
                return
            packet, lp = whole
            if len(packet) > self.max_packet:
                self._counters["face.oversize"] += 1
                return
        end = len(packet)
        typ, _, vend = read_tl(packet, 0, end)
        if vend != end:
            raise DecodeError("bytes after the fragment's TLV")
        # IncomingFaceId is ours to tell local apps, never something a peer may claim
        lp.incoming_face_id = None
        if lp.nack_reason is not None:
            if typ != T.INTEREST:
                self._counters["face.nack_not_interest"] += 1
            elif lp.next_hop_face_id is not None or lp.cache_policy is not None:
                self._counters["face.lp_field_not_allowed"] += 1
            else:
                self.stats.n_in_nacks += 1
                sink.receive_nack(self.face_id, packet, lp)
        elif typ == T.INTEREST:
            # as NFD: CachePolicy is meaningless on an Interest, NextHopFaceId is a local field
            if lp.cache_policy is not None or (
                lp.next_hop_face_id is not None and not self.is_local
            ):
                self._counters["face.lp_field_not_allowed"] += 1
            else:
                self.stats.n_in_interests += 1
                sink.receive_interest(self.face_id, packet, lp)
        elif typ == T.DATA:
            if lp.next_hop_face_id is not None:
                self._counters["face.lp_field_not_allowed"] += 1
            else:
                self.stats.n_in_data += 1
                sink.receive_data(self.face_id, packet, lp)
        else:
            self._counters["face.unknown_type"] += 1

    def _reassemble(self, lp: LpView) -> tuple[bytes, LpView] | None:
        reassembler = self._reassembler
        if reassembler is None:
            reassembler = self._reassembler = Reassembler(
                timeout=self._reassembly_timeout, counters=self._counters
            )
        return reassembler.receive(lp, self._clock())

    # ---- outgoing -------------------------------------------------------------------------

    def send_interest(self, wire: bytes) -> None:
        self.stats.n_out_interests += 1
        self._emit(wire, wire)

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        self.stats.n_out_data += 1
        if pit_token is None and not congestion_mark:
            self._emit(wire, wire)
            return
        try:
            frame = encode_lp(wire, pit_token=pit_token, congestion_mark=congestion_mark)
        except EncodeError:  # a token that is not 1-32 octets: a caller bug, not worth a crash
            self._counters["face.encode_error"] += 1
            return
        self._emit(frame, wire, pit_token, None, congestion_mark)

    def send_nack(self, interest_wire: bytes, reason: int, pit_token: bytes | None = None) -> None:
        self.stats.n_out_nacks += 1
        try:
            frame = encode_nack(interest_wire, reason, pit_token)
        except EncodeError:
            self._counters["face.encode_error"] += 1
            return
        self._emit(frame, interest_wire, pit_token, reason)

    def _emit(
        self,
        frame: bytes,
        packet: bytes,
        pit_token: bytes | None = None,
        nack_reason: int | None = None,
        congestion_mark: int = 0,
    ) -> None:
        """Send ``frame``, or fragments of ``packet`` carrying the same header if it exceeds
        the MTU (the header fields go on fragment 0); nothing if ``packet`` is too large for
        this face."""
        if len(packet) > self.max_packet:
            self._counters["face.drop_oversize"] += 1
            return
        fragmenter = self._fragmenter
        if fragmenter is None or len(frame) <= fragmenter.mtu:
            self.output(frame)
            return
        try:
            pieces = fragmenter.fragment(
                packet,
                pit_token=pit_token,
                nack_reason=nack_reason,
                congestion_mark=congestion_mark,
            )
        except EncodeError:
            self._counters["face.fragment_error"] += 1
            return
        output = self.output
        for piece in pieces:
            output(piece)
