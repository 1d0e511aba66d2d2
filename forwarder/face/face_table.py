"""FaceTable: the faces of one forwarder, by id, plus the listeners that create faces.

Ids start at 256 and are never reused, as in NFD: ids below 256 are for internal faces (the
management face, say), and a PIT record or route left pointing at a closed face can never
reach a new face that happens to get the same number.  When a face closes, for whatever reason,
the table drops it and calls ``on_face_closed(face_id)`` exactly once, so the forwarder can
remove the face's PIT records and routes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from forwarder.face.face import Face, Tap
from forwarder.face.stream import DEFAULT_SEND_LIMIT, StreamListener, connect_stream
from forwarder.face.udp import UdpListener, connect_udp
from forwarder.face.uri import FaceUri, IpNetwork, in_networks, parse_face_uri, peer_host
from forwarder.face_api import Counters, PacketSink
from icn.errors import FaceError
from icn.wire import tlv_types as T

log = logging.getLogger(__name__)

FIRST_FACE_ID = 256

Listener = StreamListener | UdpListener


class FaceTable:
    """Holds faces by id, wires each to the packet sink, reports adds and closes once each."""

    def __init__(
        self,
        counters: Counters[str],
        *,
        sink: PacketSink | None = None,
        on_face_closed: Callable[[int], object] | None = None,
        on_face_added: Callable[[Face], object] | None = None,
        local_networks: tuple[IpNetwork, ...] | None = None,
        tcp_max_packet: int = T.MAX_PACKET_SIZE,
        udp_max_packet: int = T.MAX_PACKET_SIZE,
    ) -> None:
        self.counters = counters
        # the largest packet TCP faces carry (the daemon's ``tcp_max_packet``): NDN's 8800
        # unless every TCP peer is configured alike
        self.tcp_max_packet = tcp_max_packet
        # the same for UDP faces (``udp_max_packet``); above their MTU a packet is fragmented
        self.udp_max_packet = udp_max_packet
        # IP peers inside these networks get local scope (/localhost traffic, management);
        # None keeps the transports' own rule (loopback only).
        self.local_networks = local_networks
        # the forwarder learns each face before the face can deliver its first packet
        self.on_face_added = on_face_added
        self.on_face_closed = on_face_closed
        self._sink = sink
        self._faces: dict[int, Face] = {}
        # a packet capture's tap, spliced into every face as it joins (None: no capture)
        self.tap: Tap | None = None
        self._next_id = FIRST_FACE_ID
        self.listeners: list[Listener] = []

    @property
    def sink(self) -> PacketSink | None:
        return self._sink

    @sink.setter
    def sink(self, sink: PacketSink | None) -> None:
        self._sink = sink
        for face in self._faces.values():
            face.sink = sink

    # ---- faces -----------------------------------------------------------------------------

    def add(self, face: Face, face_id: int | None = None) -> int:
        """Give ``face`` an id (the next one from 256, or a reserved one below 256) and wire it.

        Usable directly as a listener's ``on_face`` callback.
        """
        if face.closed:
            raise FaceError(f"cannot add closed face {face.remote_uri}")
        if face_id is None:
            face_id = self._next_id
            self._next_id += 1
        elif face_id >= FIRST_FACE_ID or face_id <= 0 or face_id in self._faces:
            raise FaceError(f"face id {face_id} is taken or not a reserved id (1-255)")
        face.face_id = face_id
        if self.local_networks is not None:
            host = peer_host(face.remote_uri)
            if host is not None:
                face.set_scope(in_networks(host, self.local_networks))
        face.sink = self._sink
        face.on_closed = self._face_closed
        if self.tap is not None:
            face.set_tap(self.tap)
        self._faces[face_id] = face
        self.counters["face.created"] += 1
        log.info("face %d up: %s <-> %s", face_id, face.local_uri, face.remote_uri)
        if self.on_face_added is not None:
            self.on_face_added(face)
        return face_id

    def get(self, face_id: int) -> Face | None:
        return self._faces.get(face_id)

    def __getitem__(self, face_id: int) -> Face:
        return self._faces[face_id]

    def __contains__(self, face_id: object) -> bool:
        return face_id in self._faces

    def __len__(self) -> int:
        return len(self._faces)

    def __iter__(self) -> Iterator[Face]:
        return iter(list(self._faces.values()))

    def find(self, remote_uri: str) -> Face | None:
        """The face whose remote URI is ``remote_uri`` (canonical form), if any."""
        for face in self._faces.values():
            if face.remote_uri == remote_uri:
                return face
        return None

    def _face_closed(self, face: Face) -> None:
        if self._faces.get(face.face_id) is not face:
            return
        del self._faces[face.face_id]
        self.counters["face.destroyed"] += 1
        log.info("face %d down: %s", face.face_id, face.remote_uri)
        if self.on_face_closed is not None:
            self.on_face_closed(face.face_id)

    # ---- listeners and outgoing faces -----------------------------------------------------

    async def listen(self, uri: str | FaceUri, **options: Any) -> Listener:
        """Start a listener (udp4/udp6/tcp4/tcp6/unix) whose faces join this table.

        ``options`` go to the listener (mtu, send_limit, idle_timeout, max_peers, max_frame;
        max_packet on UDP).
        """
        target = parse_face_uri(uri, listening=True) if isinstance(uri, str) else uri
        listener: Listener
        if target.is_udp:
            options = {"max_packet": self.udp_max_packet, **options}
            listener = UdpListener(target, counters=self.counters, on_face=self.add, **options)
        elif target.is_tcp or target.scheme == "unix":
            options = self._tcp_limits(target, options)
            listener = StreamListener(target, counters=self.counters, on_face=self.add, **options)
        else:
            raise FaceError(f"cannot listen on {target}: use udp4://, tcp4:// or unix://")
        await listener.start()
        self.listeners.append(listener)
        return listener

    async def connect(self, uri: str | FaceUri, **options: Any) -> Face:
        """A persistent face to a remote ``udp4://``, ``tcp4://`` or ``unix://`` URI.

        A face that already reaches that URI is returned as it is.  UDP faces go through a
        running UDP listener of the same family when there is one, so the peer's replies to our
        listening port reach the same face.
        """
        target = parse_face_uri(uri) if isinstance(uri, str) else uri
        existing = self.find(str(target))
        if existing is not None:
            return existing
        if target.is_udp:
            for listener in self.listeners:
                if isinstance(listener, UdpListener) and listener.uri.scheme == target.scheme:
                    return await listener.connect(target)
            options = {"max_packet": self.udp_max_packet, **options}
            return await connect_udp(target, counters=self.counters, on_face=self.add, **options)
        if target.is_tcp or target.scheme == "unix":
            options = self._tcp_limits(target, options)
            return await connect_stream(target, counters=self.counters, on_face=self.add, **options)
        raise FaceError(f"cannot connect to {target}: use udp4://, tcp4:// or unix://")

    def _tcp_limits(self, target: FaceUri, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` with the frame and send-queue limits of a TCP face carrying
        ``tcp_max_packet``: a queue of at least four of the largest frames, as on Unix faces."""
        if not target.is_tcp or self.tcp_max_packet <= T.MAX_PACKET_SIZE:
            return options
        frame = self.tcp_max_packet + T.LP_HEADER_ROOM
        limits = {"max_frame": frame, "send_limit": max(DEFAULT_SEND_LIMIT, 4 * frame)}
        return {**limits, **options}

    def close(self) -> None:
        """Stop the listeners and close every face (``on_face_closed`` runs for each)."""
        for listener in self.listeners:
            listener.close()
        self.listeners.clear()
        for face in list(self._faces.values()):
            face.close()
