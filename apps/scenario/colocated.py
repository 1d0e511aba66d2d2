"""A node whose forwarder runs co-located services: ``python -m apps.scenario.colocated
CONFIG.yaml SPEC.json [SPEC.json ...]``.

The launcher starts a node with co-located services (``colocate: true``) with this instead of
``icn fwd --config CONFIG.yaml``.  It reads the config as ``icn fwd`` does, runs the same
:class:`~forwarder.daemon.ForwarderDaemon` (same ready line, signals and counters), then runs
each service's entry in the same asyncio loop, reaching the forwarder through an in-memory face
(:func:`apps.inproc.attach_endpoint`) instead of the Unix socket (docs/design.md section 2).

A service is a guest: its failure never stops the forwarder.  It is logged (stderr), counted
(``scenario.service_error``) and announced on stdout as ``icn-scenario: exited NAME CODE:
REASON``, the line by which the launcher learns that a co-located service ended, as it would
from a process's exit code.  Code in a co-located service must not block: it blocks the
forwarder with it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apps.inproc import attach_endpoint
from apps.loop import run_loop
from apps.scenario.entry import (
    ServiceContext,
    load_callable,
    make_context,
    ready_line,
    start_entry,
    wait_entry,
)
from forwarder.config import ForwarderConfig, load_config
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint
from icn.errors import ConfigError
from icn.log import setup_logging

if TYPE_CHECKING:
    from apps.scenario.forwarders import NodeForwarder

log = logging.getLogger("scenario.colocated")

EXITED_MARK = "icn-scenario: exited"
ERROR_COUNTER = "scenario.service_error"
_EXITED = re.compile(rf"^{EXITED_MARK} (\S+) (-?\d+): ?(.*)$", re.MULTILINE)


def host_argv(config: Path, specs: list[Path]) -> list[str]:
    """The command line of a node running ``config``'s forwarder and the services in
    ``specs`` (the launcher's spec files)."""
    return [sys.executable, "-m", "apps.scenario.colocated", str(config), *map(str, specs)]


def exited_services(stdout: str) -> list[tuple[str, int, str]]:
    """``(name, exit code, reason)`` for each co-located service the host's stdout says ended."""
    return [(m[1], int(m[2]), m[3]) for m in _EXITED.finditer(stdout)]


async def wait_ready(host: NodeForwarder, name: str, timeout: float) -> None:
    """Wait for co-located service ``name`` to say it is serving on ``host``'s stdout (since
    the node started); RuntimeError if it ended first or the node died, TimeoutError after
    ``timeout``."""
    ready = ready_line(name) + "\n"
    deadline = time.monotonic() + timeout
    while True:
        out = host.output()
        if ready in out:
            return
        for guest, code, reason in exited_services(out):
            if guest == name:
                raise RuntimeError(f"exited with code {code} before it was ready: {reason}")
        if not host.running():
            raise RuntimeError(
                f"{host.name} exited with {host.exit_code()}:\n{host.errors()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"not ready within {timeout:g} s (no {ready.strip()!r} on {host.name}'s "
                f"stdout):\n{host.errors()[-3000:]}"
            )
        await asyncio.sleep(0.05)


class ServiceExit(Exception):
    """A co-located entry raised SystemExit (how entries reject their args): that must end
    the entry, not the forwarder's loop (asyncio lets SystemExit out of any task)."""

    def __init__(self, exc: SystemExit) -> None:
        if exc.code is None or isinstance(exc.code, int):
            self.code, self.reason = int(exc.code or 0), ""
        else:
            self.code, self.reason = 1, str(exc.code)
        super().__init__(self.reason)


def guarded(fn: Any) -> Callable[[ServiceContext], Awaitable[None]]:
    """``fn`` (async, or sync run in a thread) with SystemExit turned into ServiceExit."""

    async def run(ctx: ServiceContext) -> None:
        try:
            if inspect.iscoroutinefunction(fn):
                await fn(ctx)
            else:
                await asyncio.to_thread(fn, ctx)
        except SystemExit as exc:
            raise ServiceExit(exc) from None

    return run


async def run_service(daemon: ForwarderDaemon, spec: dict[str, Any]) -> None:
    """Run one co-located service until it ends or is cancelled, and say how it ended."""
    name = str(spec["name"])

    async def connect() -> Endpoint:
        return attach_endpoint(daemon, label=f"svc-{name}")

    code, reason = 0, ""
    try:
        fn = guarded(load_callable(str(spec["entry"])))
        ctx = make_context(spec, connect)
        await wait_entry(start_entry(fn, ctx), ctx, float(spec.get("grace", 5.0)))
    except (ServiceExit, SystemExit) as exc:  # the entry's, or load_callable's (no such entry)
        end = exc if isinstance(exc, ServiceExit) else ServiceExit(exc)
        code, reason = end.code, end.reason
    except Exception as exc:
        code, reason = 1, f"{type(exc).__name__}: {exc}"
        log.exception("co-located service %s failed", name)
    if code:
        daemon.counters[ERROR_COUNTER] += 1
        if reason:
            print(f"{name}: {reason}", file=sys.stderr, flush=True)
    print(f"{EXITED_MARK} {name} {code}: {reason.splitlines()[0] if reason else ''}", flush=True)


async def host(config: ForwarderConfig, specs: list[dict[str, Any]]) -> int:
    """The forwarder daemon as ``icn fwd`` runs it, with ``specs`` running beside it until
    SIGTERM or SIGINT."""
    setup_logging(config.log_level)
    daemon = ForwarderDaemon(config)
    await daemon.start()
    tasks = [asyncio.ensure_future(run_service(daemon, spec)) for spec in specs]
    try:
        await daemon.wait_stopped()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await daemon.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(
            "usage: python -m apps.scenario.colocated CONFIG.yaml [SPEC.json ...]", file=sys.stderr
        )
        return 2

    try:
        # the config file read exactly as `icn fwd --config CONFIG.yaml` reads it
        config = load_config(Path(args[0]))
        specs = [json.loads(Path(p).read_text()) for p in args[1:]]
        return int(run_loop(host(config, specs)))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
