"""The ceiling peer of bench/rmi.py: msgpack request/response over plain asyncio TCP.

A frame is ``u32 length (big-endian) | msgpack [call id, bytes]``; the answer to a call is a
frame with the same call id and the same bytes.  The client multiplexes its calls over one
connection by call id (as grpc's channel and the rmi endpoint multiplex theirs); the server
answers each frame as it is read, in order, with no task per call, no naming, no signature and
no authorization.  So it is the floor of what a call costs a Python asyncio process (two
processes, a TCP loopback round trip, a msgpack encode and decode each way), and its calls/s
the ceiling the other two sides are read against.

:class:`CeilingClient` is bench/rmi.py's end of it.
Prints ``ready PORT LOOP`` on stdout once listening (LOOP: the running loop, uvloop or
asyncio), stops on SIGTERM or SIGINT.
Run: python bench/rmi_ceiling_server.py [--host 127.0.0.1] [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import struct
import sys
from pathlib import Path

import msgpack

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from bench.loops import running  # noqa: E402

LENGTH = struct.Struct(">I")
MAX_FRAME = 64 << 20  # bytes; a longer length is a broken peer, not a call


def frame(call_id: int, data: bytes) -> bytes:
    body: bytes = msgpack.packb([call_id, data])
    return LENGTH.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next frame's call id and bytes; raises ValueError on a frame that is not one."""
    (size,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes, more than MAX_FRAME ({MAX_FRAME})")
    call = msgpack.unpackb(await reader.readexactly(size))
    if not (isinstance(call, list) and len(call) == 2 and isinstance(call[1], bytes)):
        raise ValueError("frame is not msgpack [call id, bytes]")
    return int(call[0]), call[1]


class CeilingClient:
    """The ceiling side's client: calls multiplexed over one TCP connection by call id, as
    grpc's channel and the rmi endpoint multiplex theirs over one connection each."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._next_id = 0
        self._lost: Exception | None = None
        self._reading = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, host: str, port: int) -> CeilingClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def call(self, data: bytes, timeout: float) -> bytes:
        if self._lost is not None:
            raise self._lost
        call_id = self._next_id
        self._next_id += 1
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = answer
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(frame(call_id, data))
                await self._writer.drain()
                return await answer
        finally:
            self._pending.pop(call_id, None)

    async def _read(self) -> None:
        try:
            while True:
                call_id, data = await read_frame(self._reader)
                answer = self._pending.get(call_id)
                if answer is not None and not answer.done():
                    answer.set_result(data)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            # the server is gone: calls waiting and to come fail now, not at their timeout
            self._lost = ConnectionError(f"ceiling server connection lost: {exc!r}")
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(self._lost)

    async def close(self) -> None:
        self._reading.cancel()
        self._writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer.wait_closed(), 5)


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            call_id, data = await read_frame(reader)
            writer.write(frame(call_id, data))
            await writer.drain()  # returns at once unless the client stopped reading
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass  # the client closed (or broke) the connection: nothing to answer
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 5)


async def main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(serve, args.host, args.port)
    port = server.sockets[0].getsockname()[1]
    print(f"ready {port} {running()}", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (--netns: the veth's)"
    )
    ap.add_argument("--port", type=int, default=0, help="TCP port (0: any free)")
    args = ap.parse_args()
    try:  # the loop the rmi server and the client run on
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run  # type: ignore[assignment]  # uvloop.run takes fewer options
    run(main(args))
