"""Face = LinkService + Transport: the object the forwarding pipelines send through.

A face implements :class:`~forwarder.face_api.FaceLike`.  Its id, packet sink and close callback
are set by the :class:`~forwarder.face.face_table.FaceTable` when the face is added, so listeners
can create faces for new peers without knowing about the forwarder.  An optional
:class:`~forwarder.face.shaper.Shaper` sits between the link service and the transport.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from forwarder.face.link_service import (
    DEFAULT_CONGESTION_INTERVAL,
    DEFAULT_CONGESTION_THRESHOLD,
    FaceStats,
    LinkService,
)
from forwarder.face.shaper import CallLater, Shaper, ShaperConfig
from forwarder.face.transport import Transport
from forwarder.face_api import PacketSink

# a packet tap: given a face and its receive and send, the two wrapped to see every link packet
PacketHook = Callable[[bytes], None]
Tap = Callable[["Face", PacketHook, PacketHook], tuple[PacketHook, PacketHook]]


class Face:
    """One link to one peer (or one local app)."""

    def __init__(
        self,
        transport: Transport,
        *,
        clock: Callable[[], float] = time.monotonic,
        reassembly_timeout: float = 0.5,
        congestion_threshold: int = DEFAULT_CONGESTION_THRESHOLD,
        congestion_interval: float = DEFAULT_CONGESTION_INTERVAL,
    ) -> None:
        self.transport = transport
        self.is_local = transport.is_local
        self.link = LinkService(
            counters=transport.counters,
            mtu=transport.mtu,
            max_packet=transport.max_packet,
            is_local=transport.is_local,
            clock=clock,
            reassembly_timeout=reassembly_timeout,
            # congestion marking watches the transport's queue, not a shaper's in front of it
            queue_length=transport.send_queue_length,
            queue_capacity=transport.send_queue_capacity,
            congestion_threshold=congestion_threshold,
            congestion_interval=congestion_interval,
        )
        self.link.output = transport.send
        # where link packets leave towards the transport: its send, or a capture's wrapper of it
        self._to_transport: Callable[[bytes], None] = transport.send
        self._tap: Tap | None = None
        # called once with this face when it closes, whatever the cause; the FaceTable sets it
        self.on_closed: Callable[[Face], object] | None = None
        self._shaper: Shaper | None = None
        self._shaped_dropped = 0  # packets the shapers this face had before its current one dropped
        transport.bind(self.link.receive, self._transport_closed)

    # ---- identity and state ---------------------------------------------------------------

    @property
    def face_id(self) -> int:
        return self.link.face_id

    @face_id.setter
    def face_id(self, value: int) -> None:
        self.link.face_id = value

    @property
    def sink(self) -> PacketSink | None:
        return self.link.sink

    @sink.setter
    def sink(self, value: PacketSink | None) -> None:
        self.link.sink = value

    @property
    def local_uri(self) -> str:
        return self.transport.local_uri

    @property
    def remote_uri(self) -> str:
        return self.transport.remote_uri

    @property
    def on_demand(self) -> bool:
        return self.transport.on_demand

    @property
    def closed(self) -> bool:
        return self.transport.closed

    def set_scope(self, is_local: bool) -> None:
        """Local or non-local scope (the face table applies the operator's local networks)."""
        self.is_local = is_local
        self.link.is_local = is_local
        self.transport.is_local = is_local

    @property
    def stats(self) -> FaceStats:
        return self.link.stats

    @property
    def shaper(self) -> Shaper | None:
        return self._shaper

    @property
    def shaper_dropped(self) -> int:
        """Packets every shaper of this face dropped (lost, over the queue, or waiting when it
        was replaced), since the face was created: a report sampling it sees a link cut's drops
        even when no sample fell between the cut and its restore."""
        current = 0 if self._shaper is None else self._shaper.dropped
        return self._shaped_dropped + current

    def status(self) -> dict[str, int | str | bool]:
        """Everything the faces/list dataset reports about this face."""
        out: dict[str, int | str | bool] = {
            "face_id": self.face_id,
            "remote_uri": self.remote_uri,
            "local_uri": self.local_uri,
            "is_local": self.is_local,
            "on_demand": self.on_demand,
        }
        out.update(self.link.stats.as_dict())
        out["n_in_bytes"] = self.transport.in_bytes
        out["n_out_bytes"] = self.transport.out_bytes
        return out

    # ---- FaceLike --------------------------------------------------------------------------

    def send_interest(self, wire: bytes) -> None:
        self.link.send_interest(wire)

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        self.link.send_data(wire, pit_token, congestion_mark)

    def send_nack(self, interest_wire: bytes, reason: int, pit_token: bytes | None = None) -> None:
        self.link.send_nack(interest_wire, reason, pit_token)

    # ---- shaping and closing ---------------------------------------------------------------

    def set_shaper(
        self,
        config: ShaperConfig | None,
        *,
        call_later: CallLater | None = None,
        clock: Callable[[], float] | None = None,
    ) -> Shaper | None:
        """Shape this face's send path with ``config`` (None removes shaping).

        Packets still waiting in a replaced shaper are dropped, as on a reconfigured link.
        ``call_later``/``clock`` default to the running loop's.
        """
        if self._shaper is not None:
            self._shaper.close()
            self._shaped_dropped += self._shaper.dropped
            self._shaper = None
        if config is None:
            self.link.output = self._to_transport
            return None
        shaper = Shaper(
            config,
            self._to_transport,
            counters=self.transport.counters,
            call_later=call_later,
            clock=clock,
        )
        self._shaper = shaper
        self.link.output = shaper.send
        return shaper

    def set_tap(self, tap: Tap | None) -> None:
        """Let ``tap`` see every link packet this face receives and sends (after its shaper:
        what the transport carries), or stop (None).  Only a tapped face pays for it: the tap's
        wrappers replace the receive and send callbacks, no test on an untapped face's path."""
        self._tap = tap
        receive: PacketHook = self.link.receive
        send = self.transport.send
        if tap is None:
            self._to_transport = send
            inbound = receive
        else:
            # the tap's own wrappers, not ours around its hooks: one call per packet, not two
            inbound, self._to_transport = tap(self, receive, send)
        if not self.transport.closed:
            self.transport.bind(inbound, self._transport_closed)
        if self._shaper is not None:
            self._shaper.set_output(self._to_transport)
        else:
            self.link.output = self._to_transport

    def close(self) -> None:
        """Close the transport; ``on_closed`` runs once, now or when the transport reports it."""
        self.transport.close()

    def _transport_closed(self) -> None:
        if self._shaper is not None:
            self._shaper.close()
        self.link.sink = None
        on_closed, self.on_closed = self.on_closed, None
        if on_closed is not None:
            on_closed(self)

    def __repr__(self) -> str:
        return f"<Face {self.face_id} {self.remote_uri}>"
