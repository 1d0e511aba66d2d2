"""The function bench/rmi.py calls, served by bench/rmi_server.py under /bench."""

from __future__ import annotations

from compute.rmi import function


@function
async def echo(data: bytes) -> bytes:
    """Return the argument: each call carries the payload both ways, as the gRPC peer's does.
    A coroutine, so it runs on the server's loop (no thread hop), like grpc.aio's handler."""
    return data
