"""The asyncio protocols under an :class:`~icn.endpoint.Endpoint`: stream framing and datagrams.

Stream faces (Unix, TCP) carry TLVs back to back with no other header, as NFD's do, so a frame
is read as VAR-NUMBER type and length and then exactly the value; UDP carries one packet per
datagram.  Each hands whole packets to the endpoint's receive path from the protocol callback.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from icn.errors import DecodeError
from icn.tlv import frame_length

if TYPE_CHECKING:
    from icn.endpoint import Endpoint

# Larger than any packet a forwarder sends (8800 plus LP header): such frames are skipped.
MAX_FRAME = 1 << 20


class StreamProtocol(asyncio.Protocol):
    """Back-to-back TLV framing: VAR-NUMBER type and length, then exactly the value."""

    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep
        self.buf = bytearray()
        self.skip = 0  # bytes still to discard of an oversized frame

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.ep._transport = transport

    def data_received(self, data: bytes) -> None:
        ep = self.ep
        if self.skip:
            n = min(self.skip, len(data))
            self.skip -= n
            data = data[n:]
        buf = self.buf
        src: bytes | bytearray = data
        if buf:
            buf += data
            src = buf
        end = len(src)
        off = 0
        while off < end and ep._transport is not None:
            try:
                size = frame_length(src, off, end)
            except DecodeError:
                ep._abort("bad TLV header from the forwarder")
                return
            if size is None or (size > end - off and size <= MAX_FRAME):
                break
            if size > MAX_FRAME:
                ep.counters["drop_oversize"] += 1
                self.skip = max(0, size - (end - off))
                off = min(end, off + size)
                continue
            ep._receive(bytes(src[off : off + size]) if src is buf else data[off : off + size])
            off += size
        if src is buf:
            del buf[:off]
        elif off < end:
            buf += data[off:]

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
