"""A remote forwarder's management, reached by the launcher as a local face: an authenticated
relay in two halves.

The launcher drives every forwarder through its Unix socket, and a forwarder takes
``/localhost`` commands only from local faces.  On the ray backend the forwarder runs on another
machine, so:

* on the forwarder's machine, its node agent listens on TCP (the Ray node's address, a free
  port) and relays each connection, once authenticated, to the forwarder's Unix socket, where
  it arrives as a local face (:func:`serve_node`);
* on the launcher's machine, a Unix socket in the run's socket directory relays each
  connection to that TCP port, authenticating first (:func:`serve_launcher`), so the fabric
  keeps using ``unix://...``.

Authentication: a per-run secret (random bytes handed to the agents through Ray, never sent on
the relay's connections).  The node half sends a fresh nonce; the launcher half answers with
HMAC-SHA256(secret, nonce); the node half checks the answer before it opens the Unix socket or
relays a single byte, and closes the connection on a wrong answer or none within
:data:`HANDSHAKE_TIMEOUT`.  A recorded answer is worthless for the next nonce.  What follows is
not encrypted: the cluster's network is trusted as far as Ray itself trusts it.

Both halves run on :class:`RelayLoop`, an asyncio loop in its own thread, beside whatever the
process does (the launcher's own loop, a Ray actor's calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

NONCE_BYTES = 16
ANSWER_BYTES = 32  # SHA-256
SECRET_BYTES = 32
HANDSHAKE_TIMEOUT = 5.0
CHUNK = 1 << 16
CALL_TIMEOUT = 10.0

T = TypeVar("T")


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def answer(secret: bytes, nonce: bytes) -> bytes:
    """What the launcher half sends back for ``nonce``."""
    return hmac.new(secret, nonce, hashlib.sha256).digest()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()


async def _splice(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    b: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Copy both ways until either side ends, then close both (a stream of NDN packets has no
    use for a half-open connection)."""
    tasks = {asyncio.ensure_future(_pipe(a[0], b[1])), asyncio.ensure_future(_pipe(b[0], a[1]))}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for writer in (a[1], b[1]):
            _close(writer)


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()


class RelayLoop:
    """An asyncio loop in a daemon thread that runs relay servers and their connections."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.servers: list[asyncio.Server] = []
        self._conns: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT) -> T:
        """Run ``coro`` on the relay's loop and return its result (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _track(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._conns.add(task)
        task.add_done_callback(self._conns.discard)

    async def serve_node(self, host: str, secret: bytes, target: Path) -> int:
        """Listen on ``host`` (a free port, returned) and relay each authenticated connection to
        the Unix socket ``target``."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._track(self._node_side(reader, writer, secret, target))

        server = await asyncio.start_server(handle, host, 0)
        self.servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _node_side(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        secret: bytes,
        target: Path,
    ) -> None:
        nonce = secrets.token_bytes(NONCE_BYTES)
        try:
            writer.write(nonce)
            async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                await writer.drain()
                got = await reader.readexactly(ANSWER_BYTES)
        except (TimeoutError, asyncio.IncompleteReadError, OSError):
            _close(writer)
            return
        if not hmac.compare_digest(got, answer(secret, nonce)):
            log.warning("management relay: refused %s (wrong answer)", _peer(writer))
            _close(writer)
            return
        try:
            unix = await asyncio.open_unix_connection(str(target))
        except OSError as exc:
            log.warning("management relay: %s: %s", target, exc)
            _close(writer)
            return
        await _splice((reader, writer), unix)

    async def serve_launcher(self, path: Path, host: str, port: int, secret: bytes) -> None:
        """A Unix socket at ``path`` (owner only) whose connections go to the node half at
        ``host:port``."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._track(self._launcher_side(reader, writer, host, port, secret))

        path.unlink(missing_ok=True)
        server = await asyncio.start_unix_server(handle, str(path))
        os.chmod(path, 0o600)
        self.servers.append(server)

    async def _launcher_side(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        secret: bytes,
    ) -> None:
        try:
            async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                remote = await asyncio.open_connection(host, port)
                nonce = await remote[0].readexactly(NONCE_BYTES)
                remote[1].write(answer(secret, nonce))
                await remote[1].drain()
        except (TimeoutError, asyncio.IncompleteReadError, OSError) as exc:
            log.warning("management relay to %s:%d: %s", host, port, exc or "timed out")
            _close(writer)
            return
        await _splice((reader, writer), remote)

    async def _close_all(self) -> None:
        for server in self.servers:
            server.close()
        for task in list(self._conns):
            task.cancel()
        for task in list(self._conns):
            with contextlib.suppress(BaseException):
                await task
        self.servers.clear()

    def close(self) -> None:
        """Stop every server and connection, then the loop and its thread (idempotent)."""
        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self.run(self._close_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CALL_TIMEOUT)
        if not self._thread.is_alive():
            self.loop.close()


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
