"""Several scenario nodes' forwarders in one process: ``python -m apps.scenario.packed PLAN.json
[NODE ...]`` starts the NODEs of the plan at once and serves the plan's control socket.

The launcher packs nodes this way (``nodes_per_process``, :mod:`apps.scenario.packing`).  Each
node is a :class:`~forwarder.daemon.ForwarderDaemon` of its own, built from the node's config
file exactly as ``icn fwd --config`` builds it: its own tables, faces, listeners on the node's
address, Unix socket (its management) and counters.  The nodes share the asyncio loop, the
interpreter and its modules (the memory saved) and the CPU, nothing else: no face, table or
route of one is the other's, and their links are UDP or TCP faces between their addresses, as
between processes.  A node's co-located services run beside its forwarder as in
:mod:`apps.scenario.colocated`, on in-memory faces to that node's forwarder only.

On stdout, for the launcher: ``icn-packed: ready NODE`` each time a node serves, ``icn-packed:
failed NODE: REASON`` when it could not start, and the co-located services' lines.

The control socket takes one JSON request per connection and answers one JSON line:

* ``{"op": "start", "node": N}``: start N again (after a kill); the answer comes once it serves.
* ``{"op": "kill", "node": N}``: N's machine dies: its forwarder stops at once (listeners,
  faces, Unix socket, timers) and its co-located services are cancelled; the other nodes run on.
* ``{"op": "counters", "node": N}``: N's counters, as the SIGUSR1 line of ``icn fwd`` has them.

An answer is ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``.  SIGTERM and SIGINT stop
every node and end the process; SIGUSR1 logs each node's counters (``counters of N: {...}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apps.loop import run_loop
from forwarder.config import load_config
from forwarder.daemon import ForwarderDaemon
from icn.errors import ConfigError, IcnError
from icn.log import setup_logging

log = logging.getLogger("scenario.packed")

READY_MARK = "icn-packed: ready"
FAILED_MARK = "icn-packed: failed"
REQUEST_LIMIT = 1 << 16  # bytes of one control request


@dataclass
class NodePlan:
    """Where a node's forwarder config and co-located services' spec files are."""

    config: Path
    services: list[Path] = field(default_factory=list)


@dataclass
class Plan:
    control: Path
    log_level: str
    nodes: dict[str, NodePlan]

    @classmethod
    def read(cls, path: Path) -> Plan:
        raw = json.loads(path.read_text())
        nodes = {
            str(name): NodePlan(Path(n["config"]), [Path(s) for s in n.get("services", [])])
            for name, n in raw["nodes"].items()
        }
        return cls(Path(raw["control"]), str(raw.get("log_level", "info")), nodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "control": str(self.control),
            "log_level": self.log_level,
            "nodes": {
                name: {"config": str(n.config), "services": [str(s) for s in n.services]}
                for name, n in self.nodes.items()
            },
        }


def packed_argv(plan: Path, start: list[str]) -> list[str]:
    """The command line of a process hosting ``plan``'s nodes, ``start`` started at once."""
    return [sys.executable, "-m", "apps.scenario.packed", str(plan), *start]


class NodeError(IcnError):
    """A request about a node this process cannot honour (unknown, running, not running)."""


@dataclass
class Running:
    daemon: ForwarderDaemon
    guests: list[asyncio.Task[None]]


class PackedHost:
    """The nodes of one plan, each started, killed and asked for counters on its own."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.running: dict[str, Running] = {}
        self._busy: set[str] = set()  # being started or killed: one request at a time each
        self._server: asyncio.AbstractServer | None = None
        self.stopping = asyncio.Event()

    def _node(self, node: str) -> NodePlan:
        try:
            return self.plan.nodes[node]
        except KeyError:
            raise NodeError(f"no node {node!r} in this process") from None

    async def start(self, node: str) -> None:
        """Start ``node``'s forwarder and its co-located services; say so on stdout."""
        plan = self._node(node)
        if node in self.running or node in self._busy:
            raise NodeError(f"{node} is running")
        self._busy.add(node)
        try:
            config = load_config(plan.config)
            specs = [json.loads(p.read_text()) for p in plan.services]
            daemon = ForwarderDaemon(config)
            await daemon.start(signals=False)
            guests: list[asyncio.Task[None]] = []
            if specs:
                from apps.scenario.colocated import run_service  # only where there are guests

                guests = [asyncio.ensure_future(run_service(daemon, s)) for s in specs]
            self.running[node] = Running(daemon, guests)
        except (ConfigError, IcnError, OSError, ValueError) as exc:
            print(f"{FAILED_MARK} {node}: {exc}".splitlines()[0], flush=True)
            raise NodeError(f"{node}: {exc}") from None
        finally:
            self._busy.discard(node)
        print(f"{READY_MARK} {node}", flush=True)

    async def start_quietly(self, node: str) -> None:
        with contextlib.suppress(NodeError):  # said on stdout
            await self.start(node)

    async def kill(self, node: str) -> None:
        """``node``'s machine dies: its services cancelled, its forwarder closed, now."""
        self._node(node)
        run = self.running.pop(node, None)
        if run is None:
            raise NodeError(f"{node} is not running")
        for task in run.guests:
            task.cancel()
        await asyncio.gather(*run.guests, return_exceptions=True)
        await run.daemon.stop()

    def counters(self, node: str) -> dict[str, Any]:
        self._node(node)
        run = self.running.get(node)
        if run is None:
            raise NodeError(f"{node} is not running")
        return run.daemon.snapshot()

    def log_counters(self) -> None:
        for node, run in self.running.items():
            snap = json.dumps(run.daemon.snapshot(), separators=(",", ":"))
            log.warning("counters of %s: %s", node, snap)

    # ---- control -----------------------------------------------------------------------------

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op, node = request.get("op"), str(request.get("node", ""))
        try:
            if op == "start":
                await self.start(node)
                return {"ok": True}
            if op == "kill":
                await self.kill(node)
                return {"ok": True}
            if op == "counters":
                return {"ok": True, "counters": self.counters(node)}
        except NodeError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": False, "error": f"unknown op {op!r}: use start, kill or counters"}

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                reply: dict[str, Any] = {"ok": False, "error": f"bad request: {exc}"}
            else:
                reply = await self.answer(request)
            writer.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            await writer.drain()
        except (OSError, asyncio.LimitOverrunError, ValueError):
            pass  # the launcher went away or sent garbage: nothing to answer
        finally:
            writer.close()

    async def serve(self) -> None:
        path = str(self.plan.control)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._server = await asyncio.start_unix_server(
            self._serve_one, path=path, limit=REQUEST_LIMIT
        )

    async def close(self) -> None:
        """Stop every node, then the control socket."""
        for node in list(self.running):
            with contextlib.suppress(NodeError):
                await self.kill(node)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(self.plan.control))


async def host(plan: Plan, start: list[str]) -> int:
    """Serve control, start ``start``'s nodes together, run until SIGTERM or SIGINT."""
    setup_logging(plan.log_level)
    packed = PackedHost(plan)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, packed.stopping.set)
    loop.add_signal_handler(signal.SIGUSR1, packed.log_counters)
    await packed.serve()
    try:
        await asyncio.gather(*(packed.start_quietly(n) for n in start))
        await packed.stopping.wait()
    finally:
        await packed.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m apps.scenario.packed PLAN.json [NODE ...]", file=sys.stderr)
        return 2
    try:
        plan = Plan.read(Path(args[0]))
        unknown = [n for n in args[1:] if n not in plan.nodes]
        if unknown:
            print(f"error: {', '.join(unknown)}: not in {args[0]}", file=sys.stderr)
            return 2
        return int(run_loop(host(plan, args[1:])))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {args[0]}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
