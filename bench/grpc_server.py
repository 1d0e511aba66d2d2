"""The gRPC peer of bench/rmi.py: a grpc.aio server with one unary method, /bench.Bench/Echo,
bytes in and bytes out (generic handler, identity serializers: no protoc, no codegen).

Prints ``ready PORT`` on stdout once listening, stops on SIGTERM or SIGINT.
Run: python bench/grpc_server.py [--port 0]     (loopback only: 127.0.0.1)
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import Any

import grpc

SERVICE = "bench.Bench"
METHOD = "Echo"


async def echo(request: bytes, context: Any) -> bytes:
    """Return the argument, as bench/rmi_funcs.py's echo does."""
    return request


async def main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
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
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    await server.start()
    print(f"ready {port}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop(grace=1.0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free)")
    args = ap.parse_args()
    asyncio.run(main(args))
