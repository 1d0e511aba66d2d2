"""Transport: moves whole link-layer packets (bare Interest/Data or LpPacket) to and from a peer.

A transport knows nothing of NDNLPv2; its face's link service does the framing.  The face binds
two callbacks: one for each received link packet and one, called exactly once, when the
transport closes for any reason (explicit close, peer gone, framing error, idle timeout).

A transport also reports its send queue (bytes accepted by :meth:`~Transport.send` and not yet
written) and that queue's capacity, as NFD's ``getSendQueueLength``/``getSendQueueCapacity``:
the link service marks packets with a CongestionMark while the queue stays long.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from forwarder.face_api import Counters
from icn.wire import tlv_types as T


def _ignore(_wire: bytes) -> None:
    """Receiver used until a face binds itself: nothing can be delivered before that."""


class Transport(ABC):
    """Base of every transport.  Subclasses implement :meth:`send` and :meth:`_close_io`."""

    def __init__(
        self,
        *,
        local_uri: str,
        remote_uri: str,
        is_local: bool,
        counters: Counters[str],
        mtu: int | None = None,
        on_demand: bool = False,
        max_packet: int = T.MAX_PACKET_SIZE,
    ) -> None:
        self.local_uri = local_uri
        self.remote_uri = remote_uri
        # local scope: Unix, in-memory, or a loopback IP peer; /localhost packets only cross these
        self.is_local = is_local
        # None = unlimited (stream faces); datagram transports fragment above this size
        self.mtu = mtu
        # largest Interest/Data the face sends or accepts: NDN's 8800 on network links (UDP,
        # TCP; more where the daemon's udp_/tcp_max_packet raise it for a fabric set alike),
        # MAX_LOCAL_PACKET_SIZE on links that stay on the host (Unix, in-memory)
        self.max_packet = max_packet
        # created by a listener for a peer that showed up (NFD's "on-demand" persistency)
        self.on_demand = on_demand
        self.counters = counters
        self.in_bytes = 0
        self.out_bytes = 0
        self.closed = False
        self._receive: Callable[[bytes], None] = _ignore
        self._on_close: Callable[[], None] | None = None

    def bind(self, receive: Callable[[bytes], None], on_close: Callable[[], None]) -> None:
        """Attach the owning face: ``receive`` gets each link packet, ``on_close`` fires once."""
        self._receive = receive
        self._on_close = on_close

    @property
    def send_queue_capacity(self) -> int:
        """Bytes the send queue may hold before :meth:`send` drops; -1 when unknown."""
        return -1

    def send_queue_length(self) -> int:
        """Bytes queued by :meth:`send` and not yet written out; -1 when the transport cannot
        tell (its packets are then never congestion-marked).  Called for every packet sent:
        subclasses keep it to an attribute read or two."""
        return -1

    @abstractmethod
    def send(self, wire: bytes) -> None:
        """Queue one link packet; drop and count instead of blocking or growing without bound."""

    @abstractmethod
    def _close_io(self) -> None:
        """Release the socket or peer link; called once, by :meth:`close`."""

    def close(self) -> None:
        """Close the transport and tell the face, once; safe to call any number of times."""
        if self.closed:
            return
        self.closed = True
        self._close_io()
        on_close, self._on_close = self._on_close, None
        self._receive = _ignore
        if on_close is not None:
            on_close()

    def _deliver(self, wire: bytes) -> None:
        """Hand one received link packet to the face (subclasses call this on their hot path)."""
        self.in_bytes += len(wire)
        self._receive(wire)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.local_uri} <-> {self.remote_uri}>"
