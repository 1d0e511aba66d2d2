"""The short way to call: ``await call("/svc/fn", ...)`` and ``call_sync`` for plain scripts.

Both use a :class:`~compute.rmi.client.Client` on the default forwarder (NDN_CLIENT_TRANSPORT,
client.conf, or NFD's socket, as every python-ndn program finds it).  ``call`` keeps one client
per event loop; ``call_sync`` connects, calls and disconnects.

They sign as ``icn call`` does (:mod:`compute.rmi.identity`): with the key file named by
$ICN_IDENTITY, else with a key made for this process.  ``set_identity`` chooses another; it is
a function rather than a keyword of ``call`` because every keyword of ``call`` is the remote
function's.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import Any

from compute.rmi.client import Client
from compute.rmi.identity import identity_file, resolve_identity
from icn.security.keys import Identity

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
    $ICN_IDENTITY.  The clients ``call`` already keeps switch too.  Returns the identity now
    used (its ``fingerprint`` is what a server lists in ``authorize=``)."""
    global _chosen
    if identity is None or isinstance(identity, Identity):
        _chosen = identity
    else:
        _chosen = resolve_identity(identity)
    now = current_identity()
    for client in list(_clients.values()):
        client.identity = now
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
    """:func:`call` for code without an event loop (it must not run inside one)."""
    identity = current_identity()  # a bad key file fails before anything connects

    async def once() -> Any:
        async with await Client.connect(identity=identity) as client:
            return await client.call(function, *args, **kwargs)

    return asyncio.run(once())
