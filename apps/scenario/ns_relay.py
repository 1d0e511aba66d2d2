"""Prometheus' way into a netns run: a TCP relay per /metrics target, from loopback here into
the node's network namespace.

On the netns backend each node's processes serve /metrics inside the node's namespace, which
has no route to the launcher's (the root namespace).  A Prometheus on this machine could not
reach them, so the launcher listens on ``127.0.0.1`` at a port the kernel picks (bound here, so
no other process can take it first) and, for each connection, opens one inside the namespace
to the target's port on its loopback, then copies bytes both ways.

The socket inside is made by a thread that has joined the namespace (``setns(2)``, which moves
only the calling thread); a socket stays in the namespace it was made in, so the launcher's
loop then uses it like any other.  One such thread per namespace, made on the first scrape.
The netns backend runs as root, which ``setns`` needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/var/run/netns")  # where ``ip netns add`` pins each namespace
CONNECT_TIMEOUT = 5.0  # seconds to reach a target inside its namespace
CHUNK = 65536


def _join_namespace(name: str) -> None:
    """Move the calling thread into network namespace ``name`` (a pool's initializer)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / name, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _socket_here() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass  # either side went away: the scrape is over
    finally:
        with contextlib.suppress(OSError):
            writer.close()


class NamespaceRelays:
    """``127.0.0.1:PORT`` here for each (namespace, port) target; :meth:`close` ends them."""

    def __init__(self) -> None:
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._servers: dict[tuple[str, int], tuple[str, asyncio.Server]] = {}
        self._clients: set[asyncio.Task[None]] = set()

    async def address(self, namespace: str, port: int) -> str:
        """``127.0.0.1:P``, relaying to ``127.0.0.1:port`` inside ``namespace`` (made once)."""
        known = self._servers.get((namespace, port))
        if known is not None:
            return known[0]

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._clients.add(task)
            try:
                await self._relay(namespace, port, reader, writer)
            finally:
                self._clients.discard(task)

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        here = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._servers[(namespace, port)] = (here, server)
        return here

    async def _relay(
        self,
        namespace: str,
        port: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(namespace)
        if pool is None:
            pool = self._pools[namespace] = ThreadPoolExecutor(
                1, f"netns-{namespace}", _join_namespace, (namespace,)
            )
        try:
            sock = await loop.run_in_executor(pool, _socket_here)
            try:
                await asyncio.wait_for(
                    loop.sock_connect(sock, ("127.0.0.1", port)), CONNECT_TIMEOUT
                )
            except BaseException:
                sock.close()
                raise
            inner_reader, inner_writer = await asyncio.open_connection(sock=sock)
        except (OSError, TimeoutError, RuntimeError) as exc:  # target down, or no setns: no reply
            log.debug("metrics relay to %s:%d: %s", namespace, port, exc)
            writer.close()
            return
        await asyncio.gather(_pipe(reader, inner_writer), _pipe(inner_reader, writer))

    async def close(self) -> None:
        for _, server in self._servers.values():
            server.close()
        for task in list(self._clients):
            task.cancel()
        for task in list(self._clients):
            with contextlib.suppress(BaseException):
                await task
        for _, server in self._servers.values():
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._pools.clear()
