"""The gRPC peer of bench/rmi.py: a grpc.aio server with one unary method, /bench.Bench/Echo,
bytes in and bytes out (generic handler, identity serializers: no protoc, no codegen).

It runs on the loop of the servers it is measured against: uvloop when installed (grpc.aio
serves under uvloop: grpcio 1.85 does, tried with calls).  Should grpc.aio fail to start under
uvloop, it starts again on asyncio's loop and says why in its ready line.
Prints ``ready PORT LOOP`` on stdout once listening (LOOP: the running loop, uvloop or asyncio,
then in parentheses why not uvloop where it is not), stops on SIGTERM or SIGINT.
Run: python bench/grpc_server.py [--host 127.0.0.1] [--port 0] [--loop auto|asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from bench.loops import running  # noqa: E402

SERVICE = "bench.Bench"
METHOD = "Echo"


class NotStarted(Exception):
    """grpc.aio failed before it listened: the server may try another loop."""


async def echo(request: bytes, context: Any) -> bytes:
    """Return the argument, as bench/rmi_funcs.py's echo does."""
    return request


async def main(args: argparse.Namespace, why_not_uvloop: str = "") -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                METHOD: grpc.unary_unary_rpc_method_handler(
                    echo, request_deserializer=None, response_serializer=None
                )
            },
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port(f"{args.host}:{args.port}")
        await server.start()
    except Exception as exc:
        raise NotStarted(f"{type(exc).__name__}: {exc}") from exc
    note = f" ({why_not_uvloop})" if why_not_uvloop else ""
    print(f"ready {port} {running()}{note}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop(grace=1.0)


def serve(args: argparse.Namespace) -> None:
    """On uvloop when installed and grpc.aio starts on it, else on asyncio's loop."""
    if args.loop == "asyncio":
        asyncio.run(main(args, "--loop asyncio"))
        return
    try:
        import uvloop
    except ImportError:
        asyncio.run(main(args, "uvloop not installed"))
        return
    try:
        uvloop.run(main(args))
    except NotStarted as exc:
        print(f"grpc.aio did not start under uvloop: {exc}; trying asyncio", file=sys.stderr)
        asyncio.run(main(args, f"grpc.aio failed under uvloop: {exc}"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (--netns: the veth's)"
    )
    ap.add_argument("--port", type=int, default=0, help="TCP port (0: any free)")
    ap.add_argument(
        "--loop",
        choices=["auto", "asyncio"],
        default="auto",
        help="auto: uvloop when installed and grpc.aio starts on it; asyncio: asyncio's loop",
    )
    serve(ap.parse_args())
