"""The short way to call: ``await call("/svc/fn", ...)`` and ``call_sync`` for plain scripts.

Both use a :class:`~compute.rmi.client.Client` on the default forwarder (NDN_CLIENT_TRANSPORT,
client.conf, or NFD's socket, as every python-ndn program finds it).  ``call`` keeps one client
per event loop; ``call_sync`` connects, calls and disconnects.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from compute.rmi.client import Client

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = weakref.WeakKeyDictionary()


async def default_client() -> Client:
    """This loop's shared client (connected on first use, reconnected if it was closed)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.ep.closed:
        client = _clients[loop] = await Client.connect()
    return client


async def call(function: str, *args: Any, **kwargs: Any) -> Any:
    """Call the named function ``function`` (``/svc/fn``) and return its result."""
    return await (await default_client()).call(function, *args, **kwargs)


def call_sync(function: str, *args: Any, **kwargs: Any) -> Any:
    """:func:`call` for code without an event loop (it must not run inside one)."""

    async def once() -> Any:
        async with await Client.connect() as client:
            return await client.call(function, *args, **kwargs)

    return asyncio.run(once())
