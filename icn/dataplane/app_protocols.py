"""The asyncio protocols under an :class:`~icn.dataplane.endpoint.Endpoint`: stream framing and
datagrams.

Stream faces (Unix, TCP) carry TLVs back to back with no other header, as NFD's do, cut by the
framer the forwarder's stream faces use (:mod:`icn.wire.framer`); UDP carries one packet per
datagram.  Each hands whole packets to the endpoint's receive path from the protocol callback.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from icn.dataplane.client_conf import TransportAddr
from icn.sockbuf import grow_unix_send_buffer
from icn.wire import tlv_types as T
from icn.wire.framer import TlvFramer
from icn.wire.tlv import Buffer

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint

# The largest frame a forwarder sends on a local face (a MAX_LOCAL_PACKET_SIZE packet with its
# LP header); a longer one is skipped and counted.
MAX_FRAME = T.MAX_LOCAL_PACKET_SIZE + T.LP_HEADER_ROOM


class StreamProtocol(asyncio.BufferedProtocol):
    """Back-to-back TLV framing by :class:`~icn.wire.framer.TlvFramer`, read straight into its
    buffer; a frame too large for any forwarder to send is skipped and counted."""

    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep
        self.framer = TlvFramer(MAX_FRAME, skip_oversize=True)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.ep._transport = transport
        grow_unix_send_buffer(transport.get_extra_info("socket"))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.framer.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._deliver(self.framer.buffer_updated(nbytes))

    def data_received(self, data: bytes) -> None:
        """A chunk read elsewhere (asyncio calls the two methods above)."""
        self._deliver(self.framer.feed(data))

    def _deliver(self, frames: list[bytes]) -> None:
        ep = self.ep
        framer = self.framer
        if framer.skipped:
            ep.counters["drop_oversize"] += framer.skipped
            framer.skipped = 0
        for frame in frames:
            if ep._transport is None:
                return
            ep._receive(frame)
        if framer.error is not None and ep._transport is not None:
            ep._abort("bad TLV header from the forwarder")

    def connection_lost(self, exc: Exception | None) -> None:
        self.ep._lost(exc)


class DatagramProtocol(asyncio.DatagramProtocol):
    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.ep._transport = transport
        self.ep._datagram = True

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if data:
            self.ep._receive(data)

    def error_received(self, exc: Exception) -> None:
        self.ep._socket_error(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.ep._lost(exc)


async def open_transport(ep: Endpoint, addr: TransportAddr) -> None:
    """Open the socket ``addr`` names (Unix, TCP or UDP), its protocol feeding ``ep``."""
    loop = asyncio.get_running_loop()
    family = {"4": socket.AF_INET, "6": socket.AF_INET6}.get(addr.scheme[-1], 0)
    if addr.scheme == "unix":
        await loop.create_unix_connection(lambda: StreamProtocol(ep), addr.host)
    elif addr.scheme.startswith("tcp"):
        await loop.create_connection(
            lambda: StreamProtocol(ep), addr.host, addr.port, family=family
        )
    else:
        await loop.create_datagram_endpoint(
            lambda: DatagramProtocol(ep), remote_addr=(addr.host, addr.port), family=family
        )


class PacketPort(Protocol):
    """One end of an in-memory link (a forwarder's in-memory transport is one): whole packets
    out with ``send``, whole packets in through the bound ``receive``, ``on_close`` once."""

    def send(self, wire: bytes) -> None: ...

    def bind(self, receive: Callable[[bytes], None], on_close: Callable[[], None]) -> None: ...

    def close(self) -> None: ...


class PortTransport:
    """Lets an :class:`~icn.dataplane.endpoint.Endpoint` write to a :class:`PacketPort` as it
    writes to a
    socket.  The port bounds its own queue (and counts what it drops), so no buffer here."""

    def __init__(self, port: PacketPort, ep: Endpoint) -> None:
        self.port = port
        self._closing = False
        port.bind(ep._receive, lambda: ep._lost(None))
        ep._transport = self

    def write(self, wire: bytes) -> None:
        self.port.send(wire)

    def writelines(self, parts: Iterable[Buffer]) -> None:
        # a port carries whole packets
        self.port.send(b"".join(parts))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self.port.close()  # the port calls on_close, which resolves the endpoint
