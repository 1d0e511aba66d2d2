"""A bare asyncio Unix-socket relay: the ceiling ``bench/bulk.py`` measures the forwarder against.

Each connection names its side with its first octet: ``P`` (the producer, one) or ``C`` (a
consumer).  Bytes from the current consumer go to the producer and bytes from the producer go to
the current consumer, with no framing, no tables and no parsing; reading pauses while the other
side's write buffer is full, as any relay that does not grow without bound must.

Run: python bench/bulk_relay.py --listen /tmp/relay.sock
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from bench.loops import running  # noqa: E402


class Hub:
    def __init__(self) -> None:
        self.producer: Side | None = None
        self.consumer: Side | None = None


class Side(asyncio.Protocol):
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.role = b""
        self.transport: asyncio.Transport | None = None
        self.paused_peers: list[Side] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=4 << 20)

    def peer(self) -> Side | None:
        return self.hub.consumer if self.role == b"P" else self.hub.producer

    def data_received(self, data: bytes) -> None:
        if not self.role:
            self.role, data = data[:1], data[1:]
            if self.role == b"P":
                self.hub.producer = self
            else:
                self.hub.consumer = self
            if not data:
                return
        peer = self.peer()
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)

    def pause_writing(self) -> None:
        # our write buffer is full: stop reading the side that fills it
        src = self.peer()
        if src is not None and src.transport is not None:
            src.transport.pause_reading()
            self.paused_peers.append(src)

    def resume_writing(self) -> None:
        for src in self.paused_peers:
            if src.transport is not None and not src.transport.is_closing():
                src.transport.resume_reading()
        self.paused_peers.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.hub.consumer is self:
            self.hub.consumer = None
        if self.hub.producer is self:
            self.hub.producer = None


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--listen", required=True, help="Unix socket path")
    args = ap.parse_args()
    loop = asyncio.get_running_loop()
    hub = Hub()
    server = await loop.create_unix_server(lambda: Side(hub), args.listen)
    stop: asyncio.Future[None] = loop.create_future()

    def on_signal() -> None:
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    print(f"relay ready {running()}", flush=True)  # and its loop
    await stop
    server.close()
    with contextlib.suppress(OSError):
        os.unlink(args.listen)


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
