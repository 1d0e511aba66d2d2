"""How a scenario's services and workloads run: one process each, started by the launcher as
``python -m apps.scenario.entry SPEC.json`` (or, for a co-located service, inside its node's
forwarder process: :mod:`apps.scenario.colocated`).

The spec names a callable ``module:function`` that takes one argument, a :class:`ServiceContext`
or :class:`WorkloadContext`, and may be async.  Through the context it reaches its node's
forwarder (``await ctx.endpoint()``), reads its ``args``, says it is serving (``ctx.ready()``),
reports metrics (``ctx.metric(name, value)``) and invariant checks (``ctx.check(name, held,
outcome)``) and, for a workload, records each operation (``ctx.record(...)``), all into a
JSON-lines file the launcher turns into the report.  SIGTERM cancels the callable; what was
recorded is flushed either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import math
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from apps.loop import run_loop
from apps.scenario.trust import ProcessTrust
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.handlers import Reply
from icn.wire.packet import InterestView
from icn.wire.signer import Signer

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from icn.observe.endpoint import MetricsEndpoint
    from icn.security.trust import Validator

READY_MARK = "icn-scenario: ready"  # followed by the service's name
METRICS_MARK = "icn-scenario: metrics"  # followed by the process' name and its HOST:PORT
SIGNAL_FAULT = signal.SIGUSR1  # what a scenario's ``signal`` fault sends
FLUSH_EVERY = 0.5

Connect = Callable[[], Awaitable[Endpoint]]


def ready_line(name: str) -> str:
    """What a service prints on stdout once serving (the launcher waits for it)."""
    return f"{READY_MARK} {name}"


def metrics_line(name: str, target: str) -> str:
    """What a process prints on stdout once its /metrics listens at ``target`` (HOST:PORT)."""
    return f"{METRICS_MARK} {name} {target}"


@dataclass
class ServiceContext:
    """What a service gets: its name, node, arguments, forwarder and a results file."""

    name: str
    node: str
    args: dict[str, Any]
    transport: str
    run_dir: Path
    links: list[tuple[str, str]] = field(default_factory=list)  # the scenario's, as pairs
    results: Path | None = None
    # how to reach the forwarder when not over ``transport`` (a co-located service's
    # in-memory face)
    connect: Connect | None = field(default=None, repr=False)
    # a trust block's part for this process (apps.scenario.trust): its key, certificate,
    # anchor and schema
    trust: ProcessTrust | None = field(default=None, repr=False)
    # with a scenario's ``metrics:`` block: what this process' /metrics serves (its CPU and
    # memory to begin with); an entry registers its own collectors here (an RMI server's)
    metrics_registry: CollectorRegistry | None = field(default=None, repr=False)
    _metrics: MetricsEndpoint | None = field(default=None, repr=False)
    _endpoint: Endpoint | None = field(default=None, repr=False)
    _validator: Validator | None = field(default=None, repr=False)
    _out: IO[str] | None = field(default=None, repr=False)
    _buffer: list[str] = field(default_factory=list, repr=False)
    _last_flush: float = field(default_factory=time.monotonic, repr=False)
    _flush_timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    async def endpoint(self) -> Endpoint:
        """The connection to this node's forwarder (made on first use, then shared).  Under
        a trust block, what it signs is signed with this process's certificate, which it
        serves under its identity for validators to fetch."""
        if self._endpoint is None or self._endpoint.closed:
            if self.connect is not None:
                ep = await self.connect()
            else:
                ep = await Endpoint.connect(self.transport)
            if self.trust is not None:
                await self._certify(ep, self.trust)
            self._endpoint = ep
        return self._endpoint

    @staticmethod
    async def _certify(ep: Endpoint, trust: ProcessTrust) -> None:
        from icn.security.certs import CertSigner

        ep.signer = CertSigner.of(trust.identity, trust.cert)
        wire = trust.cert.wire

        def serve_cert(iv: InterestView, reply: Reply) -> None:
            if trust.cert.name.startswith(iv.name):  # (its key name, or the whole name)
                reply(wire)

        await ep.serve(trust.cert.key_name, serve_cert)

    def signer(self) -> Signer | None:
        """What this process signs with: its certificate's signer under a trust block (the
        endpoint's once made), else None (each layer's default)."""
        if self.trust is None:
            return None
        from icn.security.certs import CertSigner

        return CertSigner.of(self.trust.identity, self.trust.cert)

    async def validator(self) -> Validator | None:
        """The validator a consumer here checks fetched Data with: under a trust block that
        validates, the run's schema and anchor, fetching certificates through this process's
        endpoint (then cached); else None."""
        if self.trust is None or not self.trust.validate:
            return None
        if self._validator is None:
            from icn.dataplane.validating import cert_fetcher
            from icn.security.trust import TrustSchema
            from icn.security.trust import Validator as _Validator

            ep = await self.endpoint()
            schema = TrustSchema.from_text(self.trust.schema, f"{self.name}'s trust schema")
            network = cert_fetcher(ep)
            own = self.trust.cert

            async def fetch(name: bytes) -> bytes | None:
                # its own certificate from memory: this endpoint serves it, and a forwarder
                # never sends an Interest back out of the face it came in on
                if own.name.startswith(name):
                    return own.wire
                return await network(name)

            self._validator = _Validator(schema, [self.trust.anchor], fetch=fetch)
        return self._validator

    def ready(self) -> None:
        """Tell the launcher this service is serving; it waits for this before going on."""
        print(ready_line(self.name), flush=True)

    def log(self, text: str) -> None:
        print(f"{self.name}: {text}", file=sys.stderr, flush=True)

    def on_signal(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the loop when a ``signal`` fault names this process (it arrives
        as SIGUSR1; what it means is the entry's: a replica that slows down...)."""
        asyncio.get_running_loop().add_signal_handler(SIGNAL_FAULT, callback)

    def metric(self, name: str, value: float) -> None:
        """Report ``name``'s current value (a running total such as ``bytes_resent``, or a
        level); the report keeps the last value each process reported, and sums them."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a metric needs a name, got {name!r}")
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"metric {name}: {value!r} is not a finite number")
        self._write({"t": time.time(), "metric": name, "value": v})

    @contextlib.asynccontextmanager
    async def reporting(self, report: Callable[[], None]) -> AsyncIterator[None]:
        """Call ``report()`` (which reports :meth:`metric` values) now and every
        ``args.metrics_every`` (default 0.5s) while the block runs, and once more at its end,
        so the last values are in the results however the block ends."""
        from icn.units import parse_duration

        every = parse_duration(self.args.get("metrics_every", "0.5s"))

        async def again() -> None:
            while True:
                report()
                await asyncio.sleep(every)

        task = asyncio.ensure_future(again())
        try:
            yield
        finally:
            task.cancel()
            report()

    def check(self, name: str, held: bool, outcome: str, detail: str | None = None) -> None:
        """One check of the invariant ``name`` (``exactly_once``...): ``held`` or violated,
        with its ``outcome`` (``bit-exact``, ``typed error Timeout``, ``no answer``: the report
        counts each) and an optional ``detail`` (the report keeps the first few violations').
        A violated check fails the run."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a check needs an invariant's name, got {name!r}")
        rec: dict[str, Any] = {
            "t": time.time(),
            "check": name,
            "held": bool(held),
            "outcome": str(outcome),
        }
        if detail is not None:
            rec["detail"] = str(detail)[:300]
        self._write(rec)

    def _write(self, rec: dict[str, Any]) -> None:
        self._buffer.append(json.dumps(rec))
        if time.monotonic() - self._last_flush >= FLUSH_EVERY:
            self.flush()
        elif self._flush_timer is None:
            # the last lines of a burst reach the file within FLUSH_EVERY even if none follow
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # a synchronous entry, in a thread: flushed by time or close
                return
            self._flush_timer = loop.call_later(FLUSH_EVERY, self.flush)

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if not self._buffer or self.results is None:
            return
        if self._out is None:
            self._out = open(self.results, "a")  # noqa: SIM115 (closed in close())
        self._out.write("\n".join(self._buffer) + "\n")
        self._out.flush()
        self._buffer.clear()

    async def serve_metrics(self, host: str) -> str:
        """Serve /metrics on ``host`` at a port the kernel picks (bound, not guessed: no other
        process can take it between a choice and the bind) and print it for the launcher,
        which lists it in the run's Prometheus targets; ``HOST:PORT`` is returned."""
        from prometheus_client import CollectorRegistry, ProcessCollector

        from icn.observe.endpoint import serve_metrics

        registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(namespace="icn", registry=registry)
        bracketed = f"[{host}]" if ":" in host else host
        self._metrics = await serve_metrics(f"{bracketed}:0", registry)
        self.metrics_registry = registry
        target = f"{bracketed}:{self._metrics.port}"
        print(metrics_line(self.name, target), flush=True)
        return target

    async def close_metrics(self) -> None:
        if self._metrics is not None:
            await self._metrics.close()
            self._metrics = None

    def close(self) -> None:
        self.flush()
        if self._out is not None:
            self._out.close()
            self._out = None
        if self._endpoint is not None:
            self._endpoint.close()


@dataclass
class WorkloadContext(ServiceContext):
    """A service context plus a time budget and operation records."""

    duration: float = 0.0
    started: float = field(default_factory=time.time)

    @property
    def remaining(self) -> float:
        """Seconds left of this workload's duration."""
        return max(0.0, self.started + self.duration - time.time())

    def record(
        self,
        ok: bool,
        latency: float | None = None,
        *,
        sent: float | None = None,
        nbytes: int = 0,
        error: str | None = None,
        retx: int | None = None,
        last_delay: float | None = None,
    ) -> None:
        """One operation: ``latency`` in seconds; ``sent`` (unix time) defaults to now-latency.

        A request that was re-sent says how often (``retx``) and, if answered, the seconds from
        its last transmission to the answer (``last_delay``; ``latency`` is from the first):
        the report's per-request table (ndnSIM's AppDelayTracer)."""
        now = time.time()
        if sent is None:
            sent = now - (latency or 0.0)
        rec: dict[str, Any] = {
            "t": now,
            "sent": sent,
            "ok": ok,
            "latency": latency,
            "bytes": nbytes,
        }
        if error is not None:
            rec["error"] = error
        if retx is not None:
            rec["retx"] = retx
        if last_delay is not None:
            rec["last_delay"] = last_delay
        self._write(rec)


def load_callable(entry: str) -> Any:
    module_name, _, attr = entry.partition(":")
    fn = getattr(importlib.import_module(module_name), attr, None)
    if not callable(fn):
        raise SystemExit(f"{entry}: {module_name} has no function {attr!r}")
    return fn


def make_context(spec: dict[str, Any], connect: Connect | None = None) -> ServiceContext:
    """The context ``spec`` describes; ``connect`` replaces the connection to ``transport``
    (a co-located service gets an in-memory face this way)."""
    results = spec.get("results")
    common: dict[str, Any] = {
        "name": spec["name"],
        "node": spec["node"],
        "args": spec.get("args", {}),
        "transport": spec["transport"],
        "run_dir": Path(spec["run_dir"]),
        "links": [(str(a), str(b)) for a, b in spec.get("links", [])],
        "results": Path(results) if results else None,
        "connect": connect,
        "trust": ProcessTrust.from_spec(spec["trust"]) if spec.get("trust") else None,
    }
    if spec["kind"] == "workload":
        return WorkloadContext(
            **common,
            duration=float(spec["duration"]),
            # the scheduled start, so process start-up does not stretch the workload
            started=float(spec.get("start_at") or time.time()),
        )
    return ServiceContext(**common)


def start_entry(fn: Any, ctx: ServiceContext) -> asyncio.Future[Any]:
    """Run ``fn(ctx)`` as a task (a synchronous ``fn`` in a thread)."""
    if inspect.iscoroutinefunction(fn):
        coro: Awaitable[Any] = fn(ctx)
        return asyncio.ensure_future(coro)
    return asyncio.ensure_future(asyncio.to_thread(fn, ctx))


async def wait_entry(task: asyncio.Future[Any], ctx: ServiceContext, grace: float) -> None:
    """Wait for an entry's task: a workload gets its remaining time plus ``grace``.  Being
    cancelled or running past that are normal ends; the context is closed either way."""
    limit = ctx.remaining + grace if isinstance(ctx, WorkloadContext) else None
    try:
        async with asyncio.timeout(limit):
            await task
    except TimeoutError:
        pass
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            ctx.close()


async def run_spec(spec: dict[str, Any]) -> int:
    fn = load_callable(spec["entry"])
    ctx = make_context(spec)
    if spec.get("metrics_host"):
        await ctx.serve_metrics(str(spec["metrics_host"]))
    task = start_entry(fn, ctx)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):  # stopped by the launcher: a normal end
        await wait_entry(task, ctx, float(spec.get("grace", 5.0)))
    await ctx.close_metrics()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m apps.scenario.entry SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text())

    return int(run_loop(run_spec(spec)))


if __name__ == "__main__":
    sys.exit(main())
