"""TCP and Unix stream transports and listeners.

Framing is NDN's: back-to-back TLVs with no extra header (what NFD and python-ndn speak), cut
by :class:`icn.wire.framer.TlvFramer`; the socket reads straight into its buffer (asyncio's
BufferedProtocol), a large packet into a buffer of its own.  Each
connection gets its own transport and face, so a peer that sends a bad TLV header, a TLV type
other than Interest/Data/LpPacket, or a frame larger than any packet we accept loses only its
own face; the listener and every other connection carry on.  A connection that closes in the
middle of a frame drops that partial frame and counts it ("face.truncated_frame").  Writes
never block: beyond
``send_limit`` bytes waiting in the socket buffer, packets are dropped and counted.

Unix sockets are local faces: they carry packets up to ``MAX_LOCAL_PACKET_SIZE`` (4 MiB) and
queue more.  TCP is a network face and keeps NDN's 8800 bytes, unless the daemon's
``tcp_max_packet`` raises it for a fabric whose TCP peers are all set alike.  The face's link
service drops (``face.drop_oversize``) a packet over its transport's limit instead of sending
it: the peer, with the same limit, would close the connection on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from collections.abc import Callable
from typing import Any, cast

from forwarder.face.face import Face
from forwarder.face.transport import Transport
from forwarder.face.uri import FaceUri, format_ip_uri, is_loopback, parse_face_uri
from forwarder.face_api import Counters
from icn.errors import FaceError
from icn.wire import tlv_types as T
from icn.wire.framer import TlvFramer

log = logging.getLogger(__name__)

# An 8800-byte network packet plus its NDNLPv2 header (PitToken, Nack, CongestionMark...).
MAX_FRAME_SIZE = T.MAX_PACKET_SIZE + T.LP_HEADER_ROOM
DEFAULT_SEND_LIMIT = 4 << 20
# Unix faces: a local packet plus its header; the queue holds four of them, room for a window of
# 1 MiB gradient chunks answered in one burst (and always at least two of the largest).
MAX_LOCAL_FRAME_SIZE = T.MAX_LOCAL_PACKET_SIZE + T.LP_HEADER_ROOM
LOCAL_SEND_LIMIT = 4 * T.MAX_LOCAL_PACKET_SIZE
CONNECT_TIMEOUT = 10.0
# Every accepted top-level type has a one-octet TLV-TYPE, so the first octet decides.
_FRAME_TYPES = frozenset((T.INTEREST, T.DATA, T.LP_PACKET))


class StreamTransport(Transport, asyncio.BufferedProtocol):
    """One TCP or Unix connection; also the asyncio protocol of that connection."""

    def __init__(
        self,
        *,
        counters: Counters[str],
        unix: bool,
        on_demand: bool,
        send_limit: int | None = None,
        max_frame: int | None = None,
        on_connected: Callable[[StreamTransport], None] | None = None,
    ) -> None:
        # URIs and scope are known once connected (connection_made)
        Transport.__init__(
            self,
            local_uri="",
            remote_uri="",
            is_local=unix,
            counters=counters,
            on_demand=on_demand,
        )
        self.unix = unix
        # None: the limits of the kind of face (local for Unix, network for TCP)
        self.send_limit = send_limit or (LOCAL_SEND_LIMIT if unix else DEFAULT_SEND_LIMIT)
        self.max_frame = max_frame or (MAX_LOCAL_FRAME_SIZE if unix else MAX_FRAME_SIZE)
        # what the link service sends: no frame it makes can then exceed the peer's max_frame
        self.max_packet = self.max_frame - T.LP_HEADER_ROOM
        self._on_connected = on_connected
        self._sock: asyncio.Transport | None = None
        # network faces carry packets of 9 KiB at most: a smaller shared buffer serves them
        self._framer = (
            TlvFramer(self.max_frame, types=_FRAME_TYPES)
            if unix
            else TlvFramer(
                self.max_frame, types=_FRAME_TYPES, capacity=64 << 10, own_above=32 << 10
            )
        )
        self._abort = False

    # ---- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's: cast, do not isinstance-check
        sock = cast(asyncio.Transport, transport)
        self._sock = sock
        self._set_uris(sock)
        on_connected, self._on_connected = self._on_connected, None
        if on_connected is not None:
            on_connected(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        # the socket reads straight into the framer's buffer (a large packet into its own)
        return self._framer.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self._sock is None:  # closed while asyncio still had data for us
            return
        self._deliver_all(self._framer.buffer_updated(nbytes))

    def data_received(self, data: bytes) -> None:
        """The same for a chunk read elsewhere (asyncio calls the two methods above)."""
        if self._sock is None:
            return
        self._deliver_all(self._framer.feed(data))

    def _deliver_all(self, frames: list[bytes]) -> None:
        for frame in frames:
            self._deliver(frame)
            if self.closed:
                return
        if self._framer.error is not None:
            self._fail("face." + self._framer.error)

    def eof_received(self) -> bool:
        return False  # let asyncio close the socket; connection_lost closes the face

    def connection_lost(self, exc: Exception | None) -> None:
        self._sock = None
        self.close()

    # ---- Transport -------------------------------------------------------------------------

    @property
    def send_queue_capacity(self) -> int:
        return self.send_limit

    def send_queue_length(self) -> int:
        # asyncio's buffer only: bytes the kernel has taken are not counted (NFD adds the
        # socket's TIOCOUTQ, a syscall per packet); ours grows once the kernel's is full
        sock = self._sock
        return -1 if sock is None else sock.get_write_buffer_size()

    def send(self, wire: bytes) -> None:
        sock = self._sock
        if sock is None or self.closed or sock.is_closing():
            self.counters["face.drop_closed"] += 1
            return
        if sock.get_write_buffer_size() + len(wire) > self.send_limit:
            self.counters["face.drop_send_queue_full"] += 1
            return
        sock.write(wire)
        self.out_bytes += len(wire)

    def _close_io(self) -> None:
        if self._framer.buffered:
            # the start of a packet whose end never came (the peer hung up mid-frame, or the
            # face was destroyed): dropped like any other, so counted
            self.counters["face.truncated_frame"] += 1
        sock, self._sock = self._sock, None
        if sock is not None:
            if self._abort:
                sock.abort()
            else:
                sock.close()

    def _fail(self, reason: str) -> None:
        """Bad framing from the peer: close only this connection."""
        self.counters[reason] += 1
        log.info("closing %s: %s", self.remote_uri, reason)
        # the framer holds nothing after a bad frame: it is counted under ``reason``, not as
        # truncated
        self._abort = True
        self.close()

    def _set_uris(self, sock: asyncio.Transport) -> None:
        if self.unix:
            raw = sock.get_extra_info("socket")
            fd_uri = f"fd://{raw.fileno()}" if raw is not None else "fd://"
            if self.on_demand:
                self.local_uri = f"unix://{sock.get_extra_info('sockname')}"
                self.remote_uri = fd_uri
            else:
                self.local_uri = fd_uri
                self.remote_uri = f"unix://{sock.get_extra_info('peername')}"
            return
        local = sock.get_extra_info("sockname")
        peer = sock.get_extra_info("peername")
        scheme = "tcp6" if ":" in peer[0] else "tcp4"
        self.local_uri = format_ip_uri(scheme, local[0], local[1])
        self.remote_uri = format_ip_uri(scheme, peer[0], peer[1])
        self.is_local = is_loopback(peer[0])


class StreamListener:
    """Accepts TCP or Unix connections; each becomes an on-demand face given to ``on_face``.

    ``send_limit`` and ``max_frame`` left at None take the limits of the URI's kind: local for
    ``unix://``, network (8800-byte packets) for ``tcp4://``/``tcp6://``.
    """

    def __init__(
        self,
        uri: str | FaceUri,
        *,
        counters: Counters[str],
        on_face: Callable[[Face], object],
        send_limit: int | None = None,
        max_frame: int | None = None,
    ) -> None:
        self.uri = parse_face_uri(uri, listening=True) if isinstance(uri, str) else uri
        if not (self.uri.is_tcp or self.uri.scheme == "unix"):
            raise FaceError(f"a stream listener needs a tcp4/tcp6/unix URI, got {self.uri}")
        self.counters = counters
        self.on_face = on_face
        self.send_limit = send_limit
        self.max_frame = max_frame
        self.local_uri = str(self.uri)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        uri = self.uri
        try:
            if uri.scheme == "unix":
                self._server = await loop.create_unix_server(self._factory, uri.path)
            else:
                family = socket.AF_INET6 if uri.scheme == "tcp6" else socket.AF_INET
                self._server = await loop.create_server(
                    self._factory, uri.host, uri.port, family=family, reuse_address=True
                )
                host, port = self._server.sockets[0].getsockname()[:2]
                self.local_uri = format_ip_uri(uri.scheme, host, port)
        except OSError as exc:
            raise FaceError(f"cannot listen on {uri}: {exc.strerror or exc}") from exc
        log.info("listening on %s", self.local_uri)

    def _factory(self) -> StreamTransport:
        return StreamTransport(
            counters=self.counters,
            unix=self.uri.scheme == "unix",
            on_demand=True,
            send_limit=self.send_limit,
            max_frame=self.max_frame,
            on_connected=self._accepted,
        )

    def _accepted(self, transport: StreamTransport) -> None:
        self.on_face(Face(transport))

    def close(self) -> None:
        """Stop accepting (faces already created stay up) and remove a Unix socket file."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if self.uri.scheme == "unix":
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.stat(self.uri.path).st_mode):
                    os.unlink(self.uri.path)


async def connect_stream(
    uri: str | FaceUri,
    *,
    counters: Counters[str],
    on_face: Callable[[Face], object] | None = None,
    send_limit: int | None = None,
    max_frame: int | None = None,
    timeout: float = CONNECT_TIMEOUT,
) -> Face:
    """Open a persistent face to ``tcp4://host:port``, ``tcp6://...`` or ``unix:///path``.

    ``on_face`` (e.g. ``FaceTable.add``) runs as soon as the connection is up, before anything
    the peer sends can be read, so no early packet meets a face without a sink.
    """
    target = parse_face_uri(uri) if isinstance(uri, str) else uri
    unix = target.scheme == "unix"
    if not (unix or target.is_tcp):
        raise FaceError(f"connect_stream needs a tcp4/tcp6/unix URI, got {target}")
    loop = asyncio.get_running_loop()
    faces: list[Face] = []

    def connected(transport: StreamTransport) -> None:
        face = Face(transport)
        faces.append(face)
        if on_face is not None:
            on_face(face)

    def factory() -> StreamTransport:
        return StreamTransport(
            counters=counters,
            unix=unix,
            on_demand=False,
            send_limit=send_limit,
            max_frame=max_frame,
            on_connected=connected,
        )

    conn: Any
    try:
        if unix:
            conn = loop.create_unix_connection(factory, target.path)
        else:
            family = socket.AF_INET6 if target.scheme == "tcp6" else socket.AF_INET
            conn = loop.create_connection(factory, target.host, target.port, family=family)
        await asyncio.wait_for(conn, timeout)
    except (OSError, TimeoutError) as exc:
        for face in faces:  # connected just as the timeout fired
            face.close()
        raise FaceError(f"cannot connect to {target}: {exc or 'timed out'}") from exc
    return faces[0]
