"""Serving named functions from a script: what ``icn serve`` runs, as a function.

In a program with an event loop::

    from compute.rmi import function, serve

    @function
    def add(a, b):
        return a + b

    await serve([add], prefix="/svc")          # until cancelled, or until ``stop`` is set

In a plain script, the server runs on a thread of its own while the script goes on::

    from compute.rmi import call_sync, serve_in_background

    with serve_in_background([add], prefix="/svc"):
        print(call_sync("/svc/add", 1, 2))

Both connect to the forwarder as every client does (``transport``, else NDN_CLIENT_TRANSPORT,
client.conf, NFD's socket) and sign answers with ``identity``, else the key file named by
$ICN_IDENTITY, else a key made for the run (as ``icn serve --key`` does).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from compute.rmi.functions import FunctionSpec, collect, spec_of
from compute.rmi.identity import resolve_identity
from compute.rmi.server import RmiServer, ServerConfig
from icn.dataplane.endpoint import Endpoint
from icn.errors import ConfigError, ForwarderUnreachable
from icn.security.keys import Identity

if TYPE_CHECKING:
    from icn.observe.endpoint import MetricsEndpoint
    from icn.security.certs import Certificate
    from icn.security.trust import TrustSchema, Validator

# what serve() takes as its functions: a module (or its name) with @function functions, the
# mapping collect() returns, or the decorated functions themselves
Functions = ModuleType | str | Mapping[str, FunctionSpec] | Iterable[Callable[..., Any]]
START_WAIT = 15.0  # seconds serve_in_background waits for the server to be ready
STOP_WAIT = 10.0  # seconds BackgroundServer.stop waits for the server's thread to end


def functions_of(functions: Functions) -> dict[str, FunctionSpec]:
    """The served functions by name, from any form :func:`serve` takes.  ConfigError names a
    function that is not decorated with ``@function``, a name given twice, or an empty set."""
    if isinstance(functions, ModuleType | str):
        return collect(functions)
    if isinstance(functions, Mapping):
        found = dict(functions)
        for name, spec in found.items():
            if not isinstance(spec, FunctionSpec):
                raise ConfigError(
                    f"functions[{name!r}] is {type(spec).__name__}, not a FunctionSpec: pass "
                    "what compute.rmi.collect returns, or the @function functions themselves"
                )
    else:
        found = {}
        for fn in cast(Iterable[Callable[..., Any]], functions):  # (mypy keeps ModuleType)
            spec = spec_of(fn)
            if spec is None:
                raise ConfigError(
                    f"{getattr(fn, '__qualname__', fn)!r} is not a named function: decorate it "
                    "with @compute.rmi.function"
                )
            if spec.name in found and found[spec.name].func is not spec.func:
                raise ConfigError(f"two functions named {spec.name!r}: give one another name=")
            found[spec.name] = spec
    if not found:
        raise ConfigError("no functions to serve: pass @compute.rmi.function functions")
    return found


@dataclass(frozen=True)
class Serving:
    """What :func:`serve` hands its ``ready`` callback once the prefix is registered: the
    server (its ``counters``, ``identity``), the forwarder's URI, and the URL of /metrics when
    ``metrics`` was given."""

    server: RmiServer
    uri: str
    metrics_url: str | None = None

    def describe(self) -> str:
        """One line for people: ``serving /svc/{add, mul} as key 1a2b...``."""
        from icn.wire.name import to_uri

        names = ", ".join(sorted(self.server.functions))
        key = self.server.identity.short_fingerprint
        return f"serving {to_uri(self.server.prefix)}/{{{names}}} as key {key}"


async def serve(
    functions: Functions,
    prefix: str = "/svc",
    transport: str | None = None,
    *,
    endpoint: Endpoint | None = None,
    config: ServerConfig | None = None,
    identity: Identity | None = None,
    certificate: Certificate | None = None,
    validator: Validator | None = None,
    trust: tuple[TrustSchema, list[Certificate]] | None = None,
    metrics: str | None = None,
    ready: Callable[[Serving], None] | None = None,
    stop: asyncio.Event | None = None,
) -> dict[str, int]:
    """Serve ``functions`` under ``prefix`` until cancelled or until ``stop`` is set; returns
    the server's counters (after a cancellation, CancelledError goes on once all is closed).

    The server connects to ``transport`` (see the module), or uses ``endpoint``, which stays
    open afterwards, as it is the caller's.  ``config`` sets its limits (:class:`ServerConfig`);
    ``identity`` signs its answers (default: $ICN_IDENTITY's key, else a new one), naming
    ``certificate`` if given.  Functions authorized by certificate need a ``validator``, or
    ``trust`` (a schema and its anchors: a validator fetching certificates through this
    connection).  ``metrics`` (``HOST:PORT``, port 0 for any) serves /metrics of the server and
    of the process.  ``ready(serving)`` is called once callers can reach the functions.

    ConfigError for bad arguments (before anything is served); ForwarderUnreachable when no
    forwarder answers at ``transport``, or when the connection to it is lost while serving.
    """
    specs = functions_of(functions)
    if validator is not None and trust is not None:
        raise ConfigError("serve: give a validator or a trust policy (schema, anchors), not both")
    signer = identity if identity is not None else resolve_identity()
    ep = endpoint if endpoint is not None else await Endpoint.connect(transport)
    try:
        if trust is not None:
            from icn.dataplane.validating import cert_fetcher
            from icn.security.trust import Validator

            validator = Validator(trust[0], trust[1], fetch=cert_fetcher(ep))
        server = RmiServer(
            ep,
            prefix,
            specs,
            config=config,
            identity=signer,
            certificate=certificate,
            validator=validator,
        )
        await server.start()
        exporter: MetricsEndpoint | None = None
        try:
            if metrics is not None:
                exporter = await serve_rmi_metrics(server, metrics)
            if ready is not None:
                ready(Serving(server, ep.uri, None if exporter is None else exporter.url))
            stopped = await _until_stopped(ep, stop)
        finally:
            await server.close()
            if exporter is not None:
                await exporter.close()
        if not stopped:
            raise ForwarderUnreachable(f"lost the forwarder at {ep.uri}")
        return dict(server.counters)
    finally:
        if endpoint is None:
            ep.close()
            await ep.wait_closed()


async def _until_stopped(ep: Endpoint, stop: asyncio.Event | None) -> bool:
    """True once ``stop`` is set, False if the connection closes first."""
    waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(ep.wait_closed())}
    if stop is not None:
        waits.add(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    return stop is not None and stop.is_set()


async def serve_rmi_metrics(server: RmiServer, listen: str) -> MetricsEndpoint:
    """/metrics of ``server`` and of its process (CPU, memory) on ``listen`` (HOST:PORT)."""
    from prometheus_client import CollectorRegistry, ProcessCollector

    from compute.rmi.metrics import register_rmi_metrics
    from icn.observe.endpoint import serve_metrics

    registry = CollectorRegistry(auto_describe=False)
    register_rmi_metrics(server, registry)
    ProcessCollector(namespace="icn", registry=registry)
    return await serve_metrics(listen, registry)


class BackgroundServer:
    """:func:`serve` on an event loop of its own, in a thread, for scripts without one:
    :meth:`start` returns once the functions are reachable (or raises what stopped them),
    :meth:`stop` ends it and returns its counters.  Also a context manager.  The arguments
    are :func:`serve`'s (``ready`` and ``stop`` excepted: this class uses them)."""

    def __init__(
        self,
        functions: Functions,
        prefix: str = "/svc",
        transport: str | None = None,
        **options: Any,
    ) -> None:
        for taken in ("ready", "stop", "endpoint"):
            if taken in options:
                raise ConfigError(f"BackgroundServer: {taken}= is its own; call serve() for it")
        self._args = (functions, prefix, transport)
        self._options = options
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.serving: Serving | None = None  # set once ready
        self.counters: dict[str, int] = {}  # set once stopped

    def start(self, timeout: float = START_WAIT) -> Serving:
        """Start serving; returns once callers can reach the functions.  Raises what kept the
        server from starting (ConfigError, ForwarderUnreachable), or TimeoutError."""
        if self._thread is not None:
            raise RuntimeError("BackgroundServer.start: already started")
        self._thread = threading.Thread(target=self._run, name="icn-serve", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            self.stop()
            raise TimeoutError(f"the server was not ready within {timeout} s")
        if self.serving is None:
            self._thread.join(STOP_WAIT)
            assert self._error is not None
            raise self._error
        return self.serving

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(serving: Serving) -> None:
                self.serving = serving
                self._started.set()

            self.counters = await serve(*self._args, ready=ready, stop=self._stop, **self._options)

        try:
            asyncio.run(main())
        except BaseException as exc:  # told by start() or stop(), in the caller's thread
            self._error = exc
        finally:
            self._started.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until serving has ended (stopped, or the forwarder lost): True if it has,
        False after ``timeout`` seconds.  :meth:`stop` then tells how it ended."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def stop(self, timeout: float = STOP_WAIT) -> dict[str, int]:
        """Stop serving (idempotent) and return the server's counters.  Raises what ended it
        early (ForwarderUnreachable when the forwarder went away), or TimeoutError."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return self.counters
        if loop is not None and stop is not None and thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"the server's thread did not end within {timeout} s")
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self.counters

    def __enter__(self) -> BackgroundServer:
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_background(
    functions: Functions, prefix: str = "/svc", transport: str | None = None, **options: Any
) -> BackgroundServer:
    """A started :class:`BackgroundServer` (the functions are reachable when it returns):
    ``with serve_in_background([add], prefix="/svc"): ...`` stops it at the block's end."""
    server = BackgroundServer(functions, prefix, transport, **options)
    server.start()
    return server
