"""The short way to call: ``await call("/svc/fn", ...)`` and ``call_sync`` for plain scripts.

Both use a :class:`~compute.rmi.client.Client` on the default forwarder (NDN_CLIENT_TRANSPORT,
client.conf, or NFD's socket, as every python-ndn program finds it).  ``call`` keeps one client
per event loop.  ``call_sync`` keeps one client for the whole process, on an event loop of its
own in a background thread: a loop of calls makes one connection and agrees one session with
each server, as the same calls made with ``call`` do, and calls from several threads share it.
That client is closed at interpreter exit (:func:`close_sync_client` closes it sooner).

They sign as ``icn call`` does (:mod:`compute.rmi.identity`): with the key file named by
$ICN_IDENTITY, else with a key made for this process.  ``set_identity`` chooses another; it is
a function rather than a keyword of ``call`` because every keyword of ``call`` is the remote
function's.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import weakref
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from compute.rmi.client import Client
from compute.rmi.errors import Timeout
from compute.rmi.identity import identity_file, resolve_identity
from icn.dataplane.client_conf import ENV_VAR
from icn.security.keys import Identity

CALL_TIMEOUT = 60.0  # seconds call and call_sync give a call (the Client's default)
# how long call_sync waits for its loop beyond a call's own bound: the connection (3 s at most)
# and a margin, so a wedged loop thread fails the call instead of hanging the script
SYNC_MARGIN = 10.0
CLOSE_WAIT = 5.0  # seconds close_sync_client gives the connection to close and the thread to end

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = weakref.WeakKeyDictionary()
_chosen: Identity | None = None  # set_identity's
_ephemeral: Identity | None = None  # this process's key when no file is named, as `icn call`'s


def current_identity() -> Identity:
    """What the next call signs with: :func:`set_identity`'s, else the key file named by
    $ICN_IDENTITY (read now, created if missing), else a key made once for this process.

    ConfigError names the file and the fix if that file is not a usable key.
    """
    global _ephemeral
    if _chosen is not None:
        return _chosen
    if identity_file() is not None:
        return resolve_identity()
    if _ephemeral is None:
        _ephemeral = Identity.generate()
    return _ephemeral


def set_identity(identity: Identity | str | Path | None) -> Identity:
    """Sign the calls of :func:`call` and :func:`call_sync` with ``identity``: an Identity or a
    key file (loaded, or created 0600 if missing, as ``icn call --key`` does); None goes back to
    $ICN_IDENTITY.  The clients ``call`` already keeps switch too (their sessions agreed under
    the old key end).  Returns the identity now used (its ``fingerprint`` is what a server
    lists in ``authorize=``)."""
    global _chosen
    if identity is None or isinstance(identity, Identity):
        _chosen = identity
    else:
        _chosen = resolve_identity(identity)
    now = current_identity()
    for client in list(_clients.values()):
        client.use_identity(now)  # (its sessions agreed under the old key end)
    return now


async def default_client() -> Client:
    """This loop's shared client (connected on first use, reconnected if it was closed), signing
    with :func:`current_identity` as it was then."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.ep.closed:
        client = _clients[loop] = await Client.connect(identity=current_identity())
    return client


async def call(function: str, *args: Any, **kwargs: Any) -> Any:
    """Call the named function ``function`` (``/svc/fn``) and return its result."""
    return await (await default_client()).call(function, *args, **kwargs)


def call_sync(function: str, *args: Any, **kwargs: Any) -> Any:
    """:func:`call` for code without an event loop: blocks until the result is back.

    Every call of the process goes through one client (one connection to the forwarder, one
    session per server), kept on an event loop of its own in a background thread; several
    threads may call at once and share it.  The client follows :func:`current_identity` and
    NDN_CLIENT_TRANSPORT: when either changes, the next call connects anew.  It is closed at
    interpreter exit, or by :func:`close_sync_client`.

    RuntimeError inside a running event loop (the call would block that loop): use
    ``await call(...)`` there, or ``await asyncio.to_thread(call_sync, ...)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            f"call_sync({function!r}) inside a running event loop would block it: use "
            f"`await compute.rmi.call({function!r}, ...)` there, or "
            "`await asyncio.to_thread(call_sync, ...)`"
        )
    identity = current_identity()  # a bad key file fails before anything connects
    transport = os.environ.get(ENV_VAR)
    return _SYNC.run(_SYNC.call(identity, transport, function, args, kwargs), function)


def close_sync_client() -> None:
    """Close :func:`call_sync`'s connection and stop its thread (the next call starts both
    again).  Runs by itself at interpreter exit."""
    _SYNC.close()


class _SyncCaller:
    """call_sync's clients and the event loop they live on, in a daemon thread made on first
    use.  The clients are only touched from that loop; other threads hand it coroutines."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # by (key fingerprint, NDN_CLIENT_TRANSPORT): one, unless the identity or transport
        # changed; the others are closed once their calls in flight have ended
        self._clients: dict[tuple[str, str | None], Client] = {}
        self._busy: Counter[Client] = Counter()  # calls in flight per client
        self._connecting = asyncio.Lock()  # one connection made at a time, not one per caller
        self._orphans: list[object] = []  # a forked child's copies, never touched again

    def run(self, coro: Coroutine[Any, Any, Any], function: str) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._start())
        bound = CALL_TIMEOUT + SYNC_MARGIN
        try:
            return future.result(timeout=bound)
        except TimeoutError:
            if not future.done():
                future.cancel()
                raise Timeout(
                    f"call_sync's loop gave no answer within {bound} s", function
                ) from None
            raise  # the call's own Timeout (a TimeoutError too)
        except BaseException:  # KeyboardInterrupt: the call stops too
            future.cancel()
            raise

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._serve, args=(loop,), name="icn-call-sync", daemon=True
                )
                self._connecting = asyncio.Lock()  # (a lock serves the loop it first waited on)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        """The thread: run the loop until close(), then end what is left as asyncio.run does."""
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def call(
        self,
        identity: Identity,
        transport: str | None,
        function: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        key = (identity.fingerprint, transport)
        client = self._clients.get(key)
        if client is None or client.ep.closed:
            async with self._connecting:  # calls made meanwhile wait for this connection
                client = self._clients.get(key)
                if client is None or client.ep.closed:
                    client = await Client.connect(
                        transport, identity=identity, timeout=CALL_TIMEOUT
                    )
                    self._clients[key] = client
        self._busy[client] += 1
        try:
            return await client.invoke(function, args, kwargs)
        finally:
            self._busy[client] -= 1
            if not self._busy[client]:
                del self._busy[client]
            for other, old in list(self._clients.items()):
                if other != key and old not in self._busy:
                    del self._clients[other]
                    old.close()

    async def _close_clients(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            client.close()
        for client in clients:
            await client.ep.wait_closed()

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(self._close_clients(), loop)
            try:
                done.result(timeout=CLOSE_WAIT)
            except Exception:  # a connection that would not close: the loop's end cuts it
                done.cancel()
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CLOSE_WAIT)

    def forget(self) -> None:
        """In a forked child: the parent's thread is not there, so start afresh.  The parent's
        loop and connection are kept but never used: closing them is the parent's business."""
        self._orphans.append((self._loop, self._clients))
        self._lock = threading.Lock()
        self._loop = self._thread = None
        self._clients = {}
        self._busy = Counter()
        self._connecting = asyncio.Lock()


_SYNC = _SyncCaller()
atexit.register(_SYNC.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SYNC.forget)
