"""NDNLPv2 link service: what a face does between the forwarder and a transport.

Incoming, each link packet is a bare Interest/Data or an LpPacket.  An LpPacket is unwrapped,
reassembled if fragmented, and handed to the sink with its header (PitToken, CongestionMark,
NextHopFaceId, CachePolicy) as an :class:`~icn.wire.lp.LpView`; a Nack LpPacket becomes
``receive_nack``.  Everything malformed is dropped and counted ("face.<reason>"): bad input from
the network never raises into the event loop.

Outgoing, packets go bare when there is no header to carry (what python-ndn and NFD expect),
as ``LpPacket{PitToken, CongestionMark, Fragment}`` for Data with a token or mark, and as
``LpPacket{Nack, Fragment=Interest}`` for Nacks.  A transport with a finite MTU (UDP) gets
fragments when a packet does not fit; stream transports have no MTU and never fragment.

Each face has a largest packet (its transport's ``max_packet``: 8800 bytes on UDP and TCP unless
the daemon's ``udp_max_packet`` / ``tcp_max_packet`` raise it, 4 MiB on Unix and in-memory
faces).  A larger packet is neither sent nor fragmented but dropped and
counted as "face.drop_oversize" (a packet from a local app that cannot leave the host); a larger
one received, whole or reassembled, is dropped as "face.oversize".

Congestion marking follows NFD's GenericLinkService (``checkCongestionLevel``): when a packet is
sent while the transport's send queue holds more than the threshold (64 KiB, or half the queue's
capacity if that is less), it carries ``CongestionMark=1``, subject to pacing.  The first packet
of a congestion incident is marked if no packet was marked in the last interval (100 ms); while
the queue stays above the threshold, the next mark is due ``interval/sqrt(n)`` after the n-th
one was due, so marks come faster the longer congestion lasts; the incident ends, and the pace
resets, at the first packet sent with the queue at or below the threshold.  Interests, Data and
Nacks are all marked, as in NFD; a packet already marked upstream keeps its mark.  The check is
per network packet (NFD checks each fragment; the mark travels on fragment 0 either way).  With
the queue short, the cost is one call for its length and one integer comparison.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from forwarder.face_api import Counters, PacketSink
from icn.errors import ConfigError, DecodeError, EncodeError
from icn.wire import tlv_types as T
from icn.wire.fragment import Fragmenter, Reassembler
from icn.wire.lp import LpView, encode_lp, parse_lp
from icn.wire.tlv import read_tl

log = logging.getLogger(__name__)

# NFD's GenericLinkService options: defaultCongestionThreshold, baseCongestionMarkingInterval.
DEFAULT_CONGESTION_THRESHOLD = 1 << 16
DEFAULT_CONGESTION_INTERVAL = 0.1


# FaceStats's counters, as as_dict names them (a class compiled by mypyc has no __slots__ to
# read them from)
_STATS_FIELDS = (
    "n_congestion_marked",
    "n_in_data",
    "n_in_interests",
    "n_in_nacks",
    "n_out_data",
    "n_out_interests",
    "n_out_nacks",
    "n_timed_out_interests",
)


class FaceStats:
    """Per-face packet counters: the NFD FaceStatus fields (bytes are counted by the transport)
    and, as NFD's link service keeps it, the number of packets this face congestion-marked.

    ndnSIM's per-face SatisfiedInterests and TimedOutInterests are here too.  Timed out: the
    forwarder counts, when a PIT entry expires, each face with an in-record in it.  Satisfied:
    the Data this face sent, for the forwarder sends a face Data only to answer one of its
    Interests (to its PIT in-record, or from the content store on a hit; unsolicited Data is
    dropped, never forwarded), so counting it again on the packet path would cost for nothing.
    """

    __slots__ = _STATS_FIELDS

    def __init__(self) -> None:
        self.n_in_interests = 0
        self.n_in_data = 0
        self.n_in_nacks = 0
        self.n_out_interests = 0
        self.n_out_data = 0
        self.n_out_nacks = 0
        self.n_congestion_marked = 0
        self.n_timed_out_interests = 0

    @property
    def n_satisfied_interests(self) -> int:
        return self.n_out_data

    def as_dict(self) -> dict[str, int]:
        out = {name: getattr(self, name) for name in _STATS_FIELDS}
        out["n_satisfied_interests"] = self.n_out_data
        return out


def _nowhere(_wire: bytes) -> None:
    """Output used until the face connects the link service to its transport."""


def _unknown_queue() -> int:
    """Send queue length of a link service without a transport: unknown, never marked."""
    return -1


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
        queue_length: Callable[[], int] = _unknown_queue,
        queue_capacity: int = -1,
        # (object: checked by configure_congestion, which names a bad value)
        congestion_threshold: object = DEFAULT_CONGESTION_THRESHOLD,
        congestion_interval: object = DEFAULT_CONGESTION_INTERVAL,
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
        # congestion marking: the transport's send queue, in bytes (-1: unknown)
        self._queue_length = queue_length
        self._queue_capacity = queue_capacity
        self.congestion_threshold = DEFAULT_CONGESTION_THRESHOLD
        self.congestion_interval = DEFAULT_CONGESTION_INTERVAL
        # the fast path's one comparison: the threshold, or -1 during an incident so that every
        # packet then takes the slow path, which also sees the incident end
        self._mark_above = DEFAULT_CONGESTION_THRESHOLD
        self._next_mark = math.inf
        self._last_mark = -math.inf
        self._n_marked = 0  # marks in the current incident
        self.configure_congestion(congestion_threshold, congestion_interval)

    def configure_congestion(self, threshold: object, interval: object) -> None:
        """Mark packets sent while more than ``threshold`` bytes are queued (capped at half the
        queue's capacity, as NFD does), the first of an incident at most once per ``interval``
        seconds.  ConfigError names the bad value."""
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ConfigError(
                f"congestion_threshold: {threshold!r} is not a byte count; use an integer >= 0, "
                f"e.g. {DEFAULT_CONGESTION_THRESHOLD}"
            )
        if not (isinstance(interval, int | float) and 0 < interval < math.inf):
            raise ConfigError(
                f"congestion_interval: {interval!r} is not a duration; use seconds > 0, "
                f"e.g. {DEFAULT_CONGESTION_INTERVAL}"
            )
        if self._queue_capacity >= 0:
            threshold = min(threshold, self._queue_capacity // 2)
        self.congestion_threshold = threshold
        self.congestion_interval = float(interval)
        self._end_incident()
        self._last_mark = -math.inf

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
        elif typ != T.LP_PACKET and end > self.max_packet:
            # _max_frame leaves room for an NDNLPv2 header; a bare packet gets none of it
            self._counters["face.oversize"] += 1
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
        end = len(packet)
        if end > self.max_packet:  # reassembled, or whole inside a header's room
            self._counters["face.oversize"] += 1
            return
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
                timeout=self._reassembly_timeout,
                counters=self._counters,
                max_message=self.max_packet,
            )
        return reassembler.receive(lp, self._clock())

    # ---- outgoing -------------------------------------------------------------------------

    def send_interest(self, wire: bytes) -> None:
        self.stats.n_out_interests += 1
        queued = self._queue_length()
        if queued > self._mark_above and self._congestion_mark(queued):
            self._emit(encode_lp(wire, congestion_mark=1), wire, None, None, 1)
            return
        self._emit(wire, wire)

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        self.stats.n_out_data += 1
        queued = self._queue_length()
        if queued > self._mark_above and self._congestion_mark(queued) and not congestion_mark:
            congestion_mark = 1
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
        queued = self._queue_length()
        mark = 1 if queued > self._mark_above and self._congestion_mark(queued) else 0
        try:
            frame = encode_lp(
                interest_wire, pit_token=pit_token, nack_reason=reason, congestion_mark=mark
            )
        except EncodeError:
            self._counters["face.encode_error"] += 1
            return
        self._emit(frame, interest_wire, pit_token, reason, mark)

    def _congestion_mark(self, queued: int) -> bool:
        """Slow path, for a queue above the threshold or during an incident: whether to mark
        the packet being sent (NFD's ``checkCongestionLevel``)."""
        if queued <= self.congestion_threshold:
            self._end_incident()
            return False
        now = self._clock()
        interval = self.congestion_interval
        if now < self._next_mark and now < self._last_mark + interval:
            return False
        if not self._n_marked:  # an incident starts with this mark
            self._next_mark = now
            self._mark_above = -1
        self._n_marked += 1
        self._next_mark += interval / math.sqrt(self._n_marked)
        self._last_mark = now
        self.stats.n_congestion_marked += 1
        self._counters["face.congestion_marked"] += 1
        return True

    def _end_incident(self) -> None:
        self._n_marked = 0
        self._next_mark = math.inf
        self._mark_above = self.congestion_threshold

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
