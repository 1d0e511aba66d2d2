"""How a scenario's services and workloads run: one process each, started by the launcher as
``python -m apps.scenario.entry SPEC.json``.

The spec names a callable ``module:function`` that takes one argument, a :class:`ServiceContext`
or :class:`WorkloadContext`, and may be async.  Through the context it reaches its node's
forwarder (``await ctx.endpoint()``), reads its ``args``, says it is serving (``ctx.ready()``),
and, for a workload, records each operation (``ctx.record(...)``) into a JSON-lines file the
launcher turns into the report.  SIGTERM cancels the callable; records are flushed either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from icn.endpoint import Endpoint

READY_MARK = "icn-scenario: ready"
FLUSH_EVERY = 0.5


@dataclass
class ServiceContext:
    """What a service process gets: its name, node, arguments and forwarder."""

    name: str
    node: str
    args: dict[str, Any]
    transport: str
    run_dir: Path
    _endpoint: Endpoint | None = field(default=None, repr=False)

    async def endpoint(self) -> Endpoint:
        """The connection to this node's forwarder (made on first use, then shared)."""
        if self._endpoint is None or self._endpoint.closed:
            self._endpoint = await Endpoint.connect(self.transport)
        return self._endpoint

    def ready(self) -> None:
        """Tell the launcher this process is serving; it waits for this before going on."""
        print(READY_MARK, flush=True)

    def log(self, text: str) -> None:
        print(f"{self.name}: {text}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._endpoint is not None:
            self._endpoint.close()


@dataclass
class WorkloadContext(ServiceContext):
    """A service context plus a time budget and a results file."""

    duration: float = 0.0
    results: Path | None = None
    started: float = field(default_factory=time.time)
    _out: IO[str] | None = field(default=None, repr=False)
    _buffer: list[str] = field(default_factory=list, repr=False)
    _last_flush: float = field(default_factory=time.monotonic, repr=False)

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
    ) -> None:
        """One operation: ``latency`` in seconds; ``sent`` (unix time) defaults to now-latency."""
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
        self._buffer.append(json.dumps(rec))
        if time.monotonic() - self._last_flush >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._buffer or self.results is None:
            return
        if self._out is None:
            self._out = open(self.results, "a")  # noqa: SIM115 (closed in close())
        self._out.write("\n".join(self._buffer) + "\n")
        self._out.flush()
        self._buffer.clear()

    def close(self) -> None:
        self.flush()
        if self._out is not None:
            self._out.close()
            self._out = None
        super().close()


def load_callable(entry: str) -> Any:
    module_name, _, attr = entry.partition(":")
    fn = getattr(importlib.import_module(module_name), attr, None)
    if not callable(fn):
        raise SystemExit(f"{entry}: {module_name} has no function {attr!r}")
    return fn


def make_context(spec: dict[str, Any]) -> ServiceContext:
    common = {
        "name": spec["name"],
        "node": spec["node"],
        "args": spec.get("args", {}),
        "transport": spec["transport"],
        "run_dir": Path(spec["run_dir"]),
    }
    if spec["kind"] == "workload":
        return WorkloadContext(
            **common,
            duration=float(spec["duration"]),
            results=Path(spec["results"]),
            # the scheduled start, so process start-up does not stretch the workload
            started=float(spec.get("start_at") or time.time()),
        )
    return ServiceContext(**common)


async def run_spec(spec: dict[str, Any]) -> int:
    fn = load_callable(spec["entry"])
    ctx = make_context(spec)
    loop = asyncio.get_running_loop()
    if inspect.iscoroutinefunction(fn):
        task: asyncio.Future[Any] = asyncio.ensure_future(fn(ctx))
    else:
        task = asyncio.ensure_future(asyncio.to_thread(fn, ctx))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    limit = None
    if isinstance(ctx, WorkloadContext):
        limit = ctx.remaining + float(spec.get("grace", 5.0))
    try:
        async with asyncio.timeout(limit):
            await task
        return 0
    except (asyncio.CancelledError, TimeoutError):
        return 0  # stopped by the launcher, or ran past its duration: both are normal ends
    finally:
        with contextlib.suppress(Exception):
            ctx.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m apps.scenario.entry SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text())
    from apps.cli import run_loop

    return int(run_loop(run_spec(spec)))


if __name__ == "__main__":
    sys.exit(main())
