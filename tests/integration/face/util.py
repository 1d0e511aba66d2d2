"""Helpers for socket tests: bounded waits and python-ndn-style raw clients."""

from __future__ import annotations

import asyncio
from typing import Any

from icn.wire.tlv import frame_length
from tests.waiting import wait_until

__all__ = ["DatagramPeer", "StreamClient", "datagram_peer", "wait_until"]


class DatagramPeer(asyncio.DatagramProtocol):
    """A raw UDP peer, as python-ndn's UdpFace: one NDN packet per datagram, no NDNLPv2."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.received.append(data)

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.sendto(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    @property
    def address(self) -> tuple[str, int]:
        assert self.transport is not None
        host, port = self.transport.get_extra_info("sockname")[:2]
        return host, port


async def datagram_peer(host: str, port: int) -> DatagramPeer:
    loop = asyncio.get_running_loop()
    _, peer = await loop.create_datagram_endpoint(DatagramPeer, remote_addr=(host, port))
    return peer


class StreamClient:
    """A raw stream client, as python-ndn's: bare TLVs back to back, read with TLV framing."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._buf = bytearray()

    @classmethod
    async def tcp(cls, port: int) -> StreamClient:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        return cls(reader, writer)

    @classmethod
    async def unix(cls, path: str) -> StreamClient:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), 5)
        return cls(reader, writer)

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await asyncio.wait_for(self.writer.drain(), 5)

    async def next_packet(self, timeout: float = 5.0) -> bytes:
        while True:
            if self._buf:
                size = frame_length(self._buf, 0, len(self._buf))
                if size is not None and len(self._buf) >= size:
                    packet = bytes(self._buf[:size])
                    del self._buf[:size]
                    return packet
            chunk = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not chunk:
                raise EOFError("peer closed the connection")
            self._buf += chunk

    async def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the other side closed (EOF or reset) within ``timeout``."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), timeout):
                pass
        except ConnectionResetError:
            pass
        return True

    def close(self) -> None:
        self.writer.close()
