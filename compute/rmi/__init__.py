"""Named functions over the network, RICE-style (DESIGN section 6).

Serve::

    from compute.rmi import function

    @function(pure=True)
    def add(a, b):
        return a + b

    # icn serve mymodule --prefix /svc

Call::

    from compute.rmi import call, call_sync
    await call("/svc/add", 1, 2)       # or call_sync(...) from a plain script
"""

from compute.rmi.api import call, call_sync, default_client
from compute.rmi.client import Client
from compute.rmi.errors import (
    BadArguments,
    NoSuchFunction,
    Overloaded,
    ProtocolError,
    RemoteError,
    ResultLost,
    RmiError,
    ServerUnavailable,
    Timeout,
    Unauthorized,
)
from compute.rmi.functions import FunctionSpec, collect, function
from compute.rmi.policy import Caller, allow_keys, anyone, nobody
from compute.rmi.server import RmiServer, ServerConfig

__all__ = [
    "BadArguments",
    "Caller",
    "Client",
    "FunctionSpec",
    "NoSuchFunction",
    "Overloaded",
    "ProtocolError",
    "RemoteError",
    "ResultLost",
    "RmiError",
    "RmiServer",
    "ServerConfig",
    "ServerUnavailable",
    "Timeout",
    "Unauthorized",
    "allow_keys",
    "anyone",
    "call",
    "call_sync",
    "collect",
    "default_client",
    "function",
    "nobody",
]
