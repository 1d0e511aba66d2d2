"""Run a scenario: start the nodes, wire links and routes, run services and workloads on a
timeline with faults, sample counters, and stop everything, whatever happens.

Every child process is stopped by its PID on every exit path (normal end, Ctrl-C, a part that
fails), dies with the launcher if the launcher itself is killed (PR_SET_PDEATHSIG), and is
listed in a run record so ``icn scenario clean`` can remove what a crash left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from apps.procs import Child, icn_argv
from apps.scenario import metrics
from apps.scenario.backend import Backend, LocalBackend
from apps.scenario.entry import READY_MARK
from apps.scenario.fabric import FWD_PORT, Fabric
from apps.scenario.routing import compute_routes
from apps.scenario.runs import RunRecord
from apps.scenario.schema import FaultSpec, ProcessSpec, Scenario, ServiceSpec, WorkloadSpec
from icn.errors import ConfigError, IcnError

log = logging.getLogger(__name__)

FWD_READY = "forwarder ready"
FWD_READY_TIMEOUT = 20.0
WORKLOAD_GRACE = 8.0  # time a workload gets after its duration to finish its last requests
MONITOR_EVERY = 0.1


class ScenarioFailed(IcnError):
    """A part of the run failed (a forwarder would not start, a service never got ready...)."""


@dataclass
class Event:
    t: float | None  # seconds since the start of the timeline; None during setup
    text: str


@dataclass
class RunState:
    t0: float = 0.0
    samples: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    route_events: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def make_backend(sc: Scenario, kind: str, run_id: str, run_dir: Path) -> Backend:
    if kind == "netns":
        from apps.scenario.netns import NetnsBackend

        return NetnsBackend(sc, run_id, run_dir)
    return LocalBackend(sc, run_id, run_dir)


class ScenarioRunner:
    """One run of one scenario.  ``await run()`` returns the report (a JSON-ready dict)."""

    def __init__(
        self,
        sc: Scenario,
        out_dir: Path,
        *,
        backend: str | None = None,
        on_event: Callable[[float | None, str], None] | None = None,
        run_id: str | None = None,
    ) -> None:
        self.sc = sc
        self.run_id = run_id or secrets.token_hex(3)
        self.out_dir = out_dir
        self.backend_kind = backend or sc.backend
        self.backend = make_backend(sc, self.backend_kind, self.run_id, out_dir)
        self.fabric = Fabric(sc, self.backend)
        self.state = RunState()
        self.on_event = on_event
        self.record: RunRecord | None = None
        self.children: list[Child] = []
        self.forwarders: dict[str, Child] = {}
        self.procs: dict[str, Child] = {}  # service and workload processes by name
        self.down: set[str] = set()
        self.expected_down: set[str] = set()
        self.started_at = ""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._starts: dict[str, int] = {}
        self._offsets: dict[str, int] = {}
        self._live = [0, 0]

    # ---- events and time -------------------------------------------------------------------

    def now(self) -> float:
        return time.time() - self.state.t0 if self.state.t0 else 0.0

    def event(self, text: str) -> None:
        t = self.now() if self.state.t0 else None
        self.state.events.append(Event(t, text))
        if self.on_event is not None:
            self.on_event(t, text)

    # ---- processes -------------------------------------------------------------------------

    def _spawn(self, node: str, name: str, argv: list[str]) -> Child:
        child = self.backend.spawn(node, name, argv)
        self.children.append(child)
        if self.record is not None:
            self.record.add_pid(child.pid)
        return child

    async def _wait_for(self, child: Child, text: str, timeout: float, stream: str) -> None:
        try:
            await asyncio.to_thread(child.wait_for, text, timeout, stream)
        except (RuntimeError, TimeoutError) as exc:
            raise ScenarioFailed(f"{child.name}: {exc}") from None

    def _config_path(self, node: str) -> Path:
        return self.out_dir / "config" / f"{node}.yaml"

    def _write_config(self, node: str) -> Path:
        spec = self.sc.nodes[node]
        hosts = self.backend.listen_hosts(node)
        cfg: dict[str, Any] = {
            "log_level": "info",
            # links are not local: /localhost stays with the node's own apps (Unix socket)
            "local_networks": [],
            **spec.forwarder,
            "listen": {
                "udp": [f"{h}:{FWD_PORT}" for h in hosts],
                "tcp": [f"{h}:{FWD_PORT}" for h in hosts],
                "unix": str(self.backend.unix_socket(node)),
            },
        }
        if spec.cs_capacity is not None:
            cfg.setdefault("tables", {})
            cfg["tables"] = {**cfg["tables"], "cs_max_entries": spec.cs_capacity}
        if spec.strategy is not None:
            cfg["default_strategy"] = spec.strategy
        path = self._config_path(node)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    def _log_name(self, name: str) -> str:
        """``name`` the first time, ``name.1``, ``name.2``... for restarts (logs are kept)."""
        n = self._starts.get(name, 0)
        self._starts[name] = n + 1
        return f"{name}.{n}" if n else name

    async def start_node(self, node: str) -> None:
        path = self._config_path(node)
        name = self._log_name(f"fwd-{node}")
        child = self._spawn(node, name, icn_argv("fwd", "--config", str(path)))
        self.forwarders[node] = child
        await self._wait_for(child, FWD_READY, FWD_READY_TIMEOUT, "stderr")
        await self.fabric.attach(node)
        self.down.discard(node)
        self.expected_down.discard(node)

    def _spec_file(self, proc: ProcessSpec, kind: str, duration: float | None) -> Path:
        spec: dict[str, Any] = {
            "kind": kind,
            "name": proc.name,
            "node": proc.node,
            "entry": proc.entry,
            "args": proc.args,
            "transport": f"unix://{self.backend.unix_socket(proc.node)}",
            "run_dir": str(self.out_dir),
        }
        if kind == "workload":
            spec["duration"] = duration
            spec["start_at"] = time.time()
            spec["grace"] = WORKLOAD_GRACE
            spec["results"] = str(self.results_path(proc.name))
        path = self.out_dir / "procs" / f"{proc.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec, indent=2))
        return path

    def results_path(self, name: str) -> Path:
        return self.out_dir / "results" / f"{name}.jsonl"

    def _entry_argv(self, spec_path: Path) -> list[str]:
        return [sys.executable, "-m", "apps.scenario.entry", str(spec_path)]

    async def start_service(self, svc: ServiceSpec) -> None:
        argv = self._entry_argv(self._spec_file(svc, "service", None))
        child = self._spawn(svc.node, self._log_name(svc.name), argv)
        self.procs[svc.name] = child
        await self._wait_for(child, READY_MARK, svc.ready_timeout, "stdout")

    def workload_duration(self, wl: WorkloadSpec) -> float:
        left = self.sc.duration - wl.start
        return min(wl.duration, left) if wl.duration is not None else left

    def start_workload(self, wl: WorkloadSpec) -> None:
        if wl.node in self.down:
            self.event(f"workload {wl.name} not started: node {wl.node} is down")
            return
        self.results_path(wl.name).parent.mkdir(parents=True, exist_ok=True)
        spec = self._spec_file(wl, "workload", self.workload_duration(wl))
        self.procs[wl.name] = self._spawn(wl.node, wl.name, self._entry_argv(spec))
        self.event(f"workload {wl.name} started on {wl.node}")

    def _procs_on(self, node: str) -> list[str]:
        return [p.name for p in [*self.sc.services, *self.sc.workloads] if p.node == node]

    # ---- routes ----------------------------------------------------------------------------

    async def reroute(self, reason: str) -> None:
        down_links = [frozenset(ln.between) for ln in self.sc.links if ln.name in self.fabric.cut]
        table = compute_routes(self.sc, self.down, down_links)
        changes = await self.fabric.install_routes(table)
        self.state.route_events.append(
            {"t": round(self.now(), 3), "reason": reason, "changes": changes}
        )
        self.event(f"routes updated ({reason}): {changes} changes")

    def reroute_later(self, reason: str, failure: bool) -> None:
        delay = self.sc.reconverge_after
        if delay is None:
            if failure or self.sc.routes == "auto":
                return  # a routing protocol that never reacts: leave the routes as they are
            delay = 0.0
        self._later(delay, self.reroute(reason))

    def _later(self, delay: float, coro: Any) -> None:
        async def run() -> None:
            await asyncio.sleep(delay)
            try:
                await coro
            except (IcnError, TimeoutError, OSError) as exc:
                self.event(f"error: {exc}")

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- faults ----------------------------------------------------------------------------

    async def apply_fault(self, fault: FaultSpec) -> None:
        entry: dict[str, Any] = {
            "at": fault.at,
            "applied": None,
            "action": fault.action,
            "target": fault.describe().split(" ", 1)[1],
            "disruptive": fault.disruptive,
            "error": None,
        }
        self.state.faults.append(entry)
        try:
            await self._do_fault(fault)
        except (IcnError, TimeoutError, OSError) as exc:
            entry["error"] = str(exc)
            self.event(f"fault {fault.describe()} failed: {exc}")
            return
        entry["applied"] = round(self.now(), 3)
        self.event(f"fault: {fault.describe()}")

    async def _do_fault(self, fault: FaultSpec) -> None:
        action, target = fault.action, fault.target
        if action == "kill":
            assert isinstance(target, str)
            self.kill_node(target)
            self.reroute_later(f"{target} down", failure=True)
        elif action == "restart":
            assert isinstance(target, str)
            if target not in self.down:
                raise ScenarioFailed(f"cannot restart {target}: it is running")
            await self.restart_node(target)
            self.reroute_later(f"{target} back", failure=False)
        else:
            assert isinstance(target, tuple)
            link = self.sc.link_between(*target)
            assert link is not None
            if action == "cut":
                self.fabric.cut.add(link.name)
                await self.fabric.apply_shaping(link)
                self.reroute_later(f"link {link.name} cut", failure=True)
            elif action == "restore":
                self.fabric.cut.discard(link.name)
                await self.fabric.apply_shaping(link)
                self.reroute_later(f"link {link.name} restored", failure=False)
            else:
                shaping = self.fabric.shaping[link.name]
                for attr in ("delay", "jitter", "loss", "rate"):
                    value = getattr(fault, attr)
                    if value is not None:
                        setattr(shaping, attr, value)
                await self.fabric.apply_shaping(link)

    def kill_node(self, node: str) -> None:
        """The node's machine dies: its forwarder and everything on it, at once."""
        self.expected_down.add(node)
        self.down.add(node)
        for name in self._procs_on(node):
            child = self.procs.get(name)
            if child is not None and child.proc.poll() is None:
                child.proc.kill()
        fwd = self.forwarders.get(node)
        if fwd is not None and fwd.proc.poll() is None:
            fwd.proc.kill()
            fwd.proc.wait(5)
        self.fabric.detach(node)

    async def restart_node(self, node: str) -> None:
        await self.start_node(node)
        for link in self.fabric.links_of(node):
            await self.fabric.connect_link(link)
        for svc in self.sc.services:
            if svc.node == node:
                await self.start_service(svc)

    # ---- the timeline ----------------------------------------------------------------------

    async def monitor(self) -> None:
        """Notice forwarders and services that die on their own."""
        reported: set[str] = set()
        while True:
            await asyncio.sleep(MONITOR_EVERY)
            for node, child in list(self.forwarders.items()):
                if node in self.expected_down or child.proc.poll() is None:
                    continue
                self.down.add(node)
                self.expected_down.add(node)
                self.fabric.detach(node)
                self.event(f"node {node} crashed (exit code {child.proc.returncode})")
                self.reroute_later(f"{node} crashed", failure=True)
            for proc in [*self.sc.services, *self.sc.workloads]:
                pchild = self.procs.get(proc.name)
                if pchild is None or proc.node in self.expected_down or pchild.proc.poll() is None:
                    continue
                key = f"{proc.name}:{pchild.pid}"
                code = pchild.proc.returncode
                is_service = isinstance(proc, ServiceSpec)
                if key in reported or (code == 0 and not is_service):
                    continue
                reported.add(key)
                last = (pchild.errors().strip().splitlines() or [""])[-1][:200]
                kind = "service" if is_service else "workload"
                self.event(f"{kind} {proc.name} exited with code {code}: {last}".rstrip(": "))

    async def sampler(self) -> None:
        interval = self.sc.report.interval
        next_at = time.monotonic()
        while True:
            s = await metrics.sample_quietly(self.fabric, self.now())
            if s is not None:
                self.state.samples.append(s)
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def timeline(self) -> None:
        actions: list[tuple[float, int, Any]] = []
        for i, wl in enumerate(self.sc.workloads):
            actions.append((wl.start, i, wl))
        for i, fault in enumerate(self.sc.faults):
            actions.append((fault.at, 1000 + i, fault))
        actions.sort(key=lambda a: (a[0], a[1]))
        for at, _, what in actions:
            await asyncio.sleep(max(0.0, at - self.now()))
            if isinstance(what, WorkloadSpec):
                self.start_workload(what)
            else:
                await self.apply_fault(what)
        await asyncio.sleep(max(0.0, self.sc.duration - self.now()))

    async def finish_workloads(self) -> None:
        """Give running workloads their grace to finish, then stop them."""
        deadline = time.monotonic() + WORKLOAD_GRACE
        for wl in self.sc.workloads:
            child = self.procs.get(wl.name)
            if child is None:
                continue
            while child.proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if child.proc.poll() is None:
                await asyncio.to_thread(child.stop, 3.0)

    # ---- the whole run ---------------------------------------------------------------------

    async def setup(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for wl in self.sc.workloads:  # an --out reused from an earlier run: start afresh
            self.results_path(wl.name).unlink(missing_ok=True)
        self.record = RunRecord.create(self.run_id, self.sc.name, self.backend_kind, self.out_dir)
        if hasattr(self.backend, "record"):
            self.backend.record = self.record
        self.backend.setup()
        for node in self.sc.nodes:
            self._write_config(node)
        await asyncio.gather(*(self.start_node(n) for n in self.sc.nodes))
        self.event(f"{len(self.sc.nodes)} forwarders ready ({self.backend_kind} backend)")
        for link in self.sc.links:
            await self.fabric.connect_link(link)
        for svc in self.sc.services:
            await self.start_service(svc)
        table = compute_routes(self.sc)
        changes = await self.fabric.install_routes(table)
        self.event(f"{len(self.sc.links)} links and {changes} routes installed")

    async def run(self) -> dict[str, Any]:
        from apps.scenario.report import build_report

        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        wall0 = time.monotonic()
        background: list[asyncio.Task[Any]] = []
        try:
            await self.setup()
            self.state.t0 = time.time()
            self.event(f"scenario {self.sc.name} running for {self.sc.duration:g}s")
            background = [
                asyncio.ensure_future(self.monitor()),
                asyncio.ensure_future(self.sampler()),
            ]
            await self.timeline()
            await self.finish_workloads()
            final = await metrics.sample_quietly(self.fabric, self.now())
            if final is not None:
                self.state.samples.append(final)
        finally:
            for task in [*background, *self._tasks]:
                task.cancel()
            for task in [*background, *self._tasks]:
                with contextlib.suppress(BaseException):
                    await task
            await asyncio.shield(asyncio.to_thread(self.shutdown))
        meta = {
            "run_id": self.run_id,
            "backend": self.backend_kind,
            "out_dir": str(self.out_dir),
            "started_at": self.started_at,
            "wall_seconds": round(time.monotonic() - wall0, 2),
            "events": [
                {"t": None if e.t is None else round(e.t, 3), "text": e.text}
                for e in self.state.events
            ],
        }
        return build_report(
            self.sc,
            self.state.t0,
            self.read_records(),
            self.state.samples,
            self.state.faults,
            self.state.route_events,
            meta,
        )

    def shutdown(self) -> None:
        """Stop every child by PID (last started first), then remove namespaces and sockets."""
        self.fabric.close()
        for child in reversed(self.children):
            with contextlib.suppress(Exception):
                child.stop(grace=3.0)
        try:
            self.backend.teardown()
        finally:
            if self.record is not None:
                self.record.finish()

    def live_counts(self) -> tuple[int, int]:
        """(successes, failures) recorded so far by all workloads, read incrementally from
        their results files (for the live view; records are flushed every half second)."""
        for wl in self.sc.workloads:
            path = self.results_path(wl.name)
            offset = self._offsets.get(wl.name, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._offsets[wl.name] = offset + len(complete)
            ok = complete.count(b'"ok": true')
            self._live[0] += ok
            self._live[1] += complete.count(b"\n") - ok
        return self._live[0], self._live[1]

    def read_records(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for wl in self.sc.workloads:
            path = self.results_path(wl.name)
            rows: list[dict[str, Any]] = []
            if path.exists():
                for line in path.read_text().splitlines():
                    with contextlib.suppress(ValueError):
                        rows.append(json.loads(line))
            out[wl.name] = rows
        return out


def default_out_dir(sc: Scenario) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{sc.name}-{stamp}"


__all__ = ["ConfigError", "ScenarioFailed", "ScenarioRunner", "default_out_dir"]
