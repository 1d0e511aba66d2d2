"""UDP unicast: one listening socket per address, one face per remote peer.

A listener creates an on-demand face the first time a peer sends something that looks like an
NDN packet, and closes it after ``idle_timeout`` without traffic (NFD's on-demand UDP faces).
Persistent faces to configured peers (``udp4://host:port``) are made on the listener's socket
with :meth:`UdpListener.connect`, so the peer's replies, sent to our listening port, land on
the same face; :func:`connect_udp` opens a face on its own socket when there is no listener.

Each peer has its own face, link service and reassembler: one peer's garbage, fragments or
ICMP errors only count drops and never touch another peer's face or the shared socket.

A face carries packets up to ``max_packet`` (NDN's 8800; the daemon's ``udp_max_packet`` raises
it for a fabric whose forwarders are all set alike).  Its MTU stays ``DEFAULT_MTU`` (a datagram
the kernel cuts into IP fragments for the link, as NFD's unicast UDP faces): a packet above it
leaves as NDNLPv2 fragments, which the peer's link service reassembles.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any, cast

from forwarder.face.face import Face
from forwarder.face.transport import Transport
from forwarder.face.uri import FaceUri, format_ip_uri, is_loopback, parse_face_uri
from forwarder.face_api import Counters
from icn.errors import FaceError
from icn.sockbuf import grow_buffer
from icn.wire import tlv_types as T

log = logging.getLogger(__name__)

# Largest UDP payload over IPv4 with the longest IP header, as NFD computes it; a smaller MTU
# (e.g. 1400 to avoid IP fragmentation) makes faces use NDNLPv2 fragmentation instead.
DEFAULT_MTU = 65535 - 60 - 8
# The datagram transport's own buffer only fills when the kernel's is full (EAGAIN).
DEFAULT_SEND_LIMIT = 1 << 20
# Asked of the kernel for each socket's receive queue.  Linux's default (net.core.rmem_default,
# 208 KiB, charged per datagram with its overhead) holds about twelve 8 KiB Data: a burst from a
# few peers (a collective's chunks, a window of segments) arriving while the forwarder's loop is
# busy overflows it, and every datagram the kernel drops costs its consumer a whole Interest
# lifetime.  The kernel caps the request at net.core.rmem_max.
DEFAULT_RECV_BUFFER = 4 << 20
DEFAULT_IDLE_TIMEOUT = 600.0
# Bounds the faces a flood of spoofed source addresses can create on one listener.
DEFAULT_MAX_PEERS = 4096
_NDN_TYPES = frozenset((T.INTEREST, T.DATA, T.LP_PACKET))

Addr = tuple[Any, ...]


class _UdpSocket(asyncio.DatagramProtocol):
    """What a UDP transport needs from the socket it sends through."""

    dgram: asyncio.DatagramTransport | None = None

    def forget(self, transport: UdpTransport) -> None:
        """The face of ``transport`` closed."""


class UdpTransport(Transport):
    """The link to one UDP peer, through a listener's socket or a socket of its own."""

    def __init__(
        self,
        owner: _UdpSocket,
        addr: Addr | None,
        *,
        counters: Counters[str],
        local_uri: str,
        remote_uri: str,
        peer: tuple[str, int],
        mtu: int,
        on_demand: bool,
        send_limit: int,
        max_packet: int = T.MAX_PACKET_SIZE,
    ) -> None:
        super().__init__(
            local_uri=local_uri,
            remote_uri=remote_uri,
            is_local=is_loopback(peer[0]),
            counters=counters,
            mtu=mtu,
            on_demand=on_demand,
            max_packet=max_packet,
        )
        self._owner = owner
        self._addr = addr  # None on a connected socket
        self.peer_key = peer
        self.face: Face | None = None
        self.send_limit = send_limit
        # set on every datagram, cleared by the idle sweep: a flag is cheaper than a clock read
        self.active = True

    @property
    def send_queue_capacity(self) -> int:
        return self.send_limit

    def send_queue_length(self) -> int:
        # the socket's user-space buffer, shared by every peer of a listener: it only fills
        # when the kernel's send buffer is full, and then it is congestion for all of them
        dgram = self._owner.dgram
        if dgram is None:
            return -1
        return dgram.get_write_buffer_size()  # type: ignore[attr-defined,no-any-return]

    def send(self, wire: bytes) -> None:
        dgram = self._owner.dgram
        if dgram is None or self.closed:
            self.counters["face.drop_closed"] += 1
            return
        # asyncio's and uvloop's datagram transports both have it; typeshed does not know
        if dgram.get_write_buffer_size() + len(wire) > self.send_limit:  # type: ignore[attr-defined]
            self.counters["face.drop_send_queue_full"] += 1
            return
        dgram.sendto(wire, self._addr)
        self.out_bytes += len(wire)

    def _close_io(self) -> None:
        self._owner.forget(self)


def grow_receive_buffer(sock: Any, size: int) -> int:
    """Ask for a receive queue of ``size`` bytes on ``sock``; returns what the kernel granted
    (Linux reports twice the bytes it accounts), logged when capped below the request."""
    try:
        granted = grow_buffer(sock, size, send=False)
    except OSError as exc:  # not fatal: the default queue works, it only drops bursts
        log.warning("cannot set the UDP receive buffer to %d bytes: %s", size, exc)
        return 0
    if granted < size:
        log.info(
            "UDP receive buffer capped at %d bytes (asked %d): bursts may be dropped; raise "
            "it with sysctl net.core.rmem_max=%d",
            granted,
            size,
            size,
        )
    return granted


def _family(scheme: str) -> socket.AddressFamily:
    return socket.AF_INET6 if scheme.endswith("6") else socket.AF_INET


async def _resolve(uri: FaceUri) -> tuple[str, int]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            uri.host, uri.port, family=_family(uri.scheme), type=socket.SOCK_DGRAM
        )
    except OSError as exc:
        raise FaceError(f"cannot resolve {uri}: {exc}") from exc
    if not infos:
        raise FaceError(f"cannot resolve {uri}: no address")
    sockaddr = infos[0][4]
    return str(sockaddr[0]), int(sockaddr[1])


class UdpListener(_UdpSocket):
    """A bound UDP socket that demultiplexes datagrams to one face per source address."""

    def __init__(
        self,
        uri: str | FaceUri,
        *,
        counters: Counters[str],
        on_face: Callable[[Face], object],
        mtu: int = DEFAULT_MTU,
        send_limit: int = DEFAULT_SEND_LIMIT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_peers: int = DEFAULT_MAX_PEERS,
        max_packet: int = T.MAX_PACKET_SIZE,
    ) -> None:
        self.uri = parse_face_uri(uri, listening=True) if isinstance(uri, str) else uri
        if not self.uri.is_udp:
            raise FaceError(f"a UDP listener needs a udp4/udp6 URI, got {self.uri}")
        self.counters = counters
        self.on_face = on_face
        self.mtu = mtu
        self.send_limit = send_limit
        self.idle_timeout = idle_timeout
        self.max_peers = max_peers
        # the largest packet its faces carry (the daemon's ``udp_max_packet``), fragmented
        # above ``mtu``
        self.max_packet = max_packet
        self.local_uri = str(self.uri)
        # keyed by (host, port): IPv6 source tuples also carry flow info and scope id
        self._peers: dict[Addr, UdpTransport] = {}
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def faces(self) -> list[Face]:
        return [t.face for t in self._peers.values() if t.face is not None]

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_datagram_endpoint(
                lambda: self,
                local_addr=(self.uri.host, self.uri.port),
                family=_family(self.uri.scheme),
            )
        except OSError as exc:
            raise FaceError(f"cannot listen on {self.uri}: {exc.strerror or exc}") from exc
        assert self.dgram is not None
        grow_receive_buffer(self.dgram.get_extra_info("socket"), DEFAULT_RECV_BUFFER)
        host, port = self.dgram.get_extra_info("sockname")[:2]
        self.local_uri = format_ip_uri(self.uri.scheme, host, port)
        self._sweeper = loop.call_later(self.idle_timeout / 2, self._sweep)
        log.info("listening on %s", self.local_uri)

    async def connect(self, uri: str | FaceUri) -> Face:
        """A persistent face to ``udp4://host:port`` on this socket; a known peer's face is
        reused and made persistent."""
        target = parse_face_uri(uri) if isinstance(uri, str) else uri
        if target.scheme != self.uri.scheme:
            raise FaceError(f"cannot reach {target} from a {self.uri.scheme} listener")
        if self.dgram is None:
            raise FaceError(f"UDP listener {self.local_uri} is not running")
        host, port = await _resolve(target)
        transport = self._peers.get((host, port))
        if transport is None or transport.face is None:
            transport = self._add_peer((host, port), on_demand=False)
        transport.on_demand = False  # configured now: no idle timeout
        assert transport.face is not None
        return transport.face

    # ---- asyncio.DatagramProtocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's: cast, do not isinstance-check
        self.dgram = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Addr) -> None:
        transport = self._peers.get(addr[:2])
        if transport is None:
            if not data or data[0] not in _NDN_TYPES:
                self.counters["face.udp_junk"] += 1
                return
            if len(self._peers) >= self.max_peers:
                self.counters["face.udp_too_many_peers"] += 1
                return
            transport = self._add_peer(addr, on_demand=True)
            if transport.closed:  # on_face refused it
                return
        transport.active = True
        transport._deliver(data)

    def error_received(self, exc: Exception) -> None:
        # ICMP errors (port unreachable...) caused by one peer: the socket stays up for the rest
        self.counters["face.udp_error"] += 1
        log.debug("UDP listener %s: %s", self.local_uri, exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.dgram = None
        self.close()

    # ---- faces -----------------------------------------------------------------------------

    def _add_peer(self, addr: Addr, *, on_demand: bool) -> UdpTransport:
        host, port = str(addr[0]), int(addr[1])
        transport = UdpTransport(
            self,
            addr,
            counters=self.counters,
            local_uri=self.local_uri,
            remote_uri=format_ip_uri(self.uri.scheme, host, port),
            peer=(host, port),
            mtu=self.mtu,
            on_demand=on_demand,
            send_limit=self.send_limit,
            max_packet=self.max_packet,
        )
        self._peers[(host, port)] = transport
        face = Face(transport)
        transport.face = face
        self.on_face(face)
        return transport

    def forget(self, transport: UdpTransport) -> None:
        key = transport.peer_key
        if self._peers.get(key) is transport:
            del self._peers[key]

    def _sweep(self) -> None:
        """Close on-demand faces that received nothing during the last two sweep intervals."""
        for transport in list(self._peers.values()):
            if not transport.on_demand:
                continue
            if transport.active:
                transport.active = False
            else:
                self.counters["face.idle_closed"] += 1
                transport.close()
        if self.dgram is not None:
            loop = asyncio.get_running_loop()
            self._sweeper = loop.call_later(self.idle_timeout / 2, self._sweep)

    def close(self) -> None:
        """Close the socket and every face on it."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for transport in list(self._peers.values()):
            transport.close()
        dgram, self.dgram = self.dgram, None
        if dgram is not None:
            dgram.close()


class _UdpClient(_UdpSocket):
    """The socket of a single persistent face (no listener); closing the face closes it."""

    def __init__(self) -> None:
        self.transport: UdpTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's: cast, do not isinstance-check
        self.dgram = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Addr) -> None:
        if self.transport is not None:
            self.transport._deliver(data)

    def error_received(self, exc: Exception) -> None:
        if self.transport is not None:
            self.transport.counters["face.udp_error"] += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.dgram = None
        if self.transport is not None:
            self.transport.close()

    def forget(self, transport: UdpTransport) -> None:
        self.transport = None
        dgram, self.dgram = self.dgram, None
        if dgram is not None:
            dgram.close()


async def connect_udp(
    uri: str | FaceUri,
    *,
    counters: Counters[str],
    on_face: Callable[[Face], object] | None = None,
    mtu: int = DEFAULT_MTU,
    send_limit: int = DEFAULT_SEND_LIMIT,
    max_packet: int = T.MAX_PACKET_SIZE,
) -> Face:
    """A persistent face to ``udp4://host:port`` on its own connected socket."""
    target = parse_face_uri(uri) if isinstance(uri, str) else uri
    if not target.is_udp:
        raise FaceError(f"connect_udp needs a udp4/udp6 URI, got {target}")
    host, port = await _resolve(target)
    loop = asyncio.get_running_loop()
    client = _UdpClient()
    try:
        await loop.create_datagram_endpoint(
            lambda: client, remote_addr=(host, port), family=_family(target.scheme)
        )
    except OSError as exc:
        raise FaceError(f"cannot open a UDP socket to {target}: {exc}") from exc
    assert client.dgram is not None
    grow_receive_buffer(client.dgram.get_extra_info("socket"), DEFAULT_RECV_BUFFER)
    local = client.dgram.get_extra_info("sockname")
    transport = UdpTransport(
        client,
        None,
        counters=counters,
        local_uri=format_ip_uri(target.scheme, local[0], local[1]),
        remote_uri=format_ip_uri(target.scheme, host, port),
        peer=(host, port),
        mtu=mtu,
        on_demand=False,
        send_limit=send_limit,
        max_packet=max_packet,
    )
    client.transport = transport
    face = Face(transport)
    transport.face = face
    if on_face is not None:
        on_face(face)
    return face
