"""A bare asyncio UDP relay that does no table work: the ceiling the forwarder is measured against.

Datagrams from the upstream address go to the last downstream peer seen; everything else goes
upstream.  Run: python bench/udp_relay.py --listen 127.0.0.1:7001 --upstream 127.0.0.1:7002
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from bench.loops import running  # noqa: E402


class Relay(asyncio.DatagramProtocol):
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.downstream: tuple[str, int] | None = None
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's UDP transport does not subclass asyncio.DatagramTransport
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self.transport is not None
        if addr == self.upstream:
            if self.downstream is not None:
                self.transport.sendto(data, self.downstream)
        else:
            self.downstream = addr
            self.transport.sendto(data, self.upstream)


def _addr(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host, int(port)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--listen", required=True)
    ap.add_argument("--upstream", required=True)
    args = ap.parse_args()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: Relay(_addr(args.upstream)), local_addr=_addr(args.listen)
    )
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    print(f"relay ready {running()}", flush=True)  # and its loop
    await stop
    transport.close()


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
