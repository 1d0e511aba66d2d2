"""Named functions over the network, RICE-style (docs/design.md section 6).

Serve::

    from compute.rmi import function, serve, serve_in_background

    @function(pure=True)
    def add(a, b):
        return a + b

    await serve([add], prefix="/svc")      # until cancelled; or, from the command line,
                                           # icn serve mymodule --prefix /svc

    with serve_in_background([add], prefix="/svc"):   # a plain script: a thread serves
        ...

Call::

    from compute.rmi import call, call_sync
    await call("/svc/add", 1, 2)       # or call_sync(...) from a plain script: one
                                       # connection and one session for all its calls

Calls sign with the key file named by $ICN_IDENTITY (else a key made for the process), as
``icn call`` does; ``set_identity(path_or_identity)`` chooses another.
"""

from compute.rmi.api import (
    call,
    call_sync,
    close_sync_client,
    current_identity,
    default_client,
    set_identity,
)
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
from compute.rmi.identity import resolve_identity
from compute.rmi.policy import Caller, allow_keys, anyone, nobody
from compute.rmi.server import RmiServer, ServerConfig
from compute.rmi.serving import BackgroundServer, Serving, serve, serve_in_background

__all__ = [
    "BackgroundServer",
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
    "Serving",
    "Timeout",
    "Unauthorized",
    "allow_keys",
    "anyone",
    "call",
    "call_sync",
    "close_sync_client",
    "collect",
    "current_identity",
    "default_client",
    "function",
    "nobody",
    "resolve_identity",
    "serve",
    "serve_in_background",
    "set_identity",
]
