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
from apps.scenario import colocated, metrics, packing, results
from apps.scenario.backend import Backend, LocalBackend
from apps.scenario.entry import METRICS_MARK, ready_line
from apps.scenario.fabric import Fabric
from apps.scenario.faults import apply_fault
from apps.scenario.forwarders import (
    ForwarderHost,
    NodeForwarder,
    NotReady,
    PackedForwarder,
    SoloForwarder,
    await_ready,
)
from apps.scenario.ns_relay import NamespaceRelays
from apps.scenario.packed import NodePlan, Plan, packed_argv
from apps.scenario.routing import compute_routes
from apps.scenario.runs import RunRecord
from apps.scenario.schema import FaultSpec, ProcessSpec, Scenario, ServiceSpec, WorkloadSpec
from apps.scenario.trust import make_trust
from icn.errors import ConfigError, IcnError

log = logging.getLogger(__name__)

TARGETS_FILE = "prometheus-targets.json"  # file-based service discovery for Prometheus
METRICS_WAIT = 30.0  # seconds a process has to say where its /metrics listens
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
    ended_at: float | None = None  # seconds after t0 the timeline ended (None: not yet)
    samples: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    route_events: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def make_backend(
    sc: Scenario, kind: str, run_id: str, run_dir: Path, address: str | None = None
) -> Backend:
    if kind == "netns":
        from apps.scenario.netns import NetnsBackend

        return NetnsBackend(sc, run_id, run_dir)
    if kind == "ray":  # address: the Ray cluster's (else $RAY_ADDRESS)
        from apps.scenario.ray_backend import RayBackend

        return RayBackend(sc, run_id, run_dir, address)
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
        address: str | None = None,
    ) -> None:
        self.sc = sc
        self.run_id = run_id or secrets.token_hex(3)
        self.out_dir = out_dir
        self.backend_kind = backend or sc.backend
        self.backend = make_backend(sc, self.backend_kind, self.run_id, out_dir, address)
        self.fabric = Fabric(sc, self.backend)
        self.state = RunState()
        self.on_event = on_event
        self.record: RunRecord | None = None
        self.children: list[Child] = []
        self.forwarders: dict[str, NodeForwarder] = {}
        try:  # nodes per forwarder process (packing.py); the groups of nodes that share one
            self.per_process = packing.per_process(
                sc.nodes_per_process, len(sc.nodes), self.backend_kind
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.groups = packing.plan_groups(list(sc.nodes), self.per_process)
        self.group_of = {node: i for i, group in enumerate(self.groups) for node in group}
        self.hosts: dict[int, ForwarderHost] = {}  # group -> the process hosting it now
        self.procs: dict[str, Child] = {}  # service and workload processes by name
        # with metrics: each service's and workload's /metrics: name -> (node, kind, HOST:PORT)
        self.proc_targets: dict[str, tuple[str, str, str]] = {}
        # netns: a target inside a node's namespace -> the relay that reaches it from here
        self.reach: dict[tuple[str, str], str] = {}
        self.relays: NamespaceRelays | None = None
        self.down: set[str] = set()
        self.expected_down: set[str] = set()
        self.expected_exit: set[int] = set()  # PIDs of processes a fault killed
        self.stopped: set[str] = set()  # services and workloads killed or failed, nodes up
        self.started_at = ""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._starts: dict[str, int] = {}
        self.live = results.LiveCounts()
        # the run's CA, identities and schema (a trust block): made once, handed out in specs
        self.trust = make_trust(sc) if sc.trust is not None else None

    # ---- events and time -------------------------------------------------------------------

    def now(self) -> float:
        return time.time() - self.state.t0 if self.state.t0 else 0.0

    def event(self, text: str) -> None:
        t = self.now() if self.state.t0 else None
        self.state.events.append(Event(t, text))
        if self.on_event is not None:
            self.on_event(t, text)

    # ---- processes -------------------------------------------------------------------------

    async def _spawn(self, node: str, name: str, argv: list[str]) -> Child:
        # awaited: on ray a start waits on the node's agent, which must not stop the loop
        child = await self.backend.start(node, name, argv)
        self.children.append(child)
        if self.record is not None and self.backend.local_processes:
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
        port = self.backend.listen_port(node)
        cfg: dict[str, Any] = {
            "log_level": "info",
            # links are not local: /localhost stays with the node's own apps (Unix socket)
            "local_networks": [],
            **spec.forwarder,
            "listen": {
                "udp": [f"{h}:{port}" for h in hosts],
                "tcp": [f"{h}:{port}" for h in hosts],
                "unix": str(self.backend.unix_socket(node)),
            },
        }
        if spec.cs_capacity is not None:
            cfg.setdefault("tables", {})
            cfg["tables"] = {**cfg["tables"], "cs_max_entries": spec.cs_capacity}
        if spec.strategy is not None:
            cfg["default_strategy"] = spec.strategy
        capture = self.sc.capture
        if capture is not None and (capture.nodes == "all" or node in capture.nodes):
            pcap = self.out_dir / "pcap" / f"{node}.pcapng"
            pcap.parent.mkdir(parents=True, exist_ok=True)
            cfg["capture"] = {
                "file": str(pcap),
                "max_bytes": capture.max_bytes,
                "files": capture.files,
            }
        target = self.metrics_target(node)
        if target is not None:
            cfg["metrics"] = {"listen": target}
        path = self._config_path(node)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    def metrics_target(self, node: str) -> str | None:
        """``HOST:PORT`` of ``node``'s /metrics (its own address: nodes never share a port)."""
        if self.sc.metrics is None:
            return None
        host = self.backend.listen_hosts(node)[0]
        return (
            f"[{host}]:{self.sc.metrics.port}" if ":" in host else f"{host}:{self.sc.metrics.port}"
        )

    def write_targets(self) -> Path:
        """``prometheus-targets.json``: every forwarder's /metrics and every service's and
        workload's that said where it listens, in Prometheus' file-based service discovery
        format, labelled with node, kind, process, scenario and run.  Rewritten whole (to a
        temporary file, then renamed: Prometheus never reads half a file) when a process
        starts or restarts on another port."""
        run = {"scenario": self.sc.name, "run": self.run_id}
        entries = []
        for node, kind, name, target in self._targets():
            labels = {"node": node, "kind": kind, "process": name} | run
            entries.append({"targets": [self.reach.get((node, target), target)], "labels": labels})
        path = self.out_dir / TARGETS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, indent=1) + "\n")
        tmp.replace(path)
        return path

    def _targets(self) -> list[tuple[str, str, str, str]]:
        """(node, kind, process, HOST:PORT where it listens) of every /metrics of the run."""
        out = []
        for node in self.sc.nodes:
            target = self.metrics_target(node)
            if target is not None:
                out.append((node, "forwarder", node, target))
        for name, (node, kind, target) in sorted(self.proc_targets.items()):
            out.append((node, kind, name, target))
        return out

    async def publish_targets(self) -> Path:
        """:meth:`write_targets`, after making a relay for each target inside a namespace (the
        netns backend: no route leads there from this machine's own namespace)."""
        namespaces: dict[str, str] | None = getattr(self.backend, "namespaces", None)
        if namespaces is not None:
            if self.relays is None:
                self.relays = NamespaceRelays()
            for node, _, _, target in self._targets():
                port = int(target.rpartition(":")[2])
                self.reach[(node, target)] = await self.relays.address(namespaces[node], port)
        return self.write_targets()

    def watch_metrics(self, proc: ProcessSpec, child: Child) -> None:
        """With ``metrics:``: read where ``proc``'s /metrics listens from its output (the
        process binds a free port itself and prints it) and list it in the targets file."""
        if self.sc.metrics is None or not hasattr(child, "output"):
            return
        mark = f"{METRICS_MARK} {proc.name} "
        kind = _kind(proc)

        async def watch() -> None:
            deadline = time.monotonic() + METRICS_WAIT
            while time.monotonic() < deadline:
                text = await asyncio.to_thread(child.output)
                for line in text.splitlines():
                    if line.startswith(mark):
                        self.proc_targets[proc.name] = (proc.node, kind, line[len(mark) :])
                        await self.publish_targets()
                        return
                if child.proc.poll() is not None:
                    return  # it ended first: its restart, if any, is watched again
                await asyncio.sleep(0.1)
            self.event(f"metrics: {proc.name} did not say where its /metrics listens")

        task = asyncio.ensure_future(watch())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _log_name(self, name: str) -> str:
        """``name`` the first time, ``name.1``, ``name.2``... for restarts (logs are kept)."""
        n = self._starts.get(name, 0)
        self._starts[name] = n + 1
        return f"{name}.{n}" if n else name

    def node_argv(self, node: str) -> list[str]:
        """``icn fwd --config``, or the co-located host when services are co-located there
        (their spec files written)."""
        path = self._config_path(node)
        guests = self._guests(node)
        if not guests:
            return icn_argv("fwd", "--config", str(path))
        return colocated.host_argv(path, [self._spec_file(s, "service", None) for s in guests])

    async def start_node(self, node: str) -> None:
        """Start ``node``'s forwarder (with its co-located services, which
        :meth:`start_service` waits for) and attach the launcher to it."""
        await self.start_nodes([node])

    async def start_nodes(self, nodes: list[str]) -> None:
        """Start these nodes' forwarders together, each in a process of its own or in its
        group's host, wait for all of them at once (longer for more of them) and attach the
        launcher to each; ScenarioFailed naming those not ready if any is not."""
        handles = await self._launch(nodes)
        processes = len({h.pid for h in handles})
        try:
            await await_ready(handles, packing.ready_timeout(len(handles), processes))
        except NotReady as exc:
            raise ScenarioFailed(str(exc)) from None
        await self.fabric.attach_all(nodes)
        for node in nodes:
            self.down.discard(node)
            self.expected_down.discard(node)

    async def _launch(self, nodes: list[str]) -> list[NodeForwarder]:
        """Start ``nodes``: a process each, or (packed) a host for their group, or a request
        to the group's running host (a restart)."""
        handles: list[NodeForwarder] = []
        if self.per_process == 1:
            for node in nodes:
                name = self._log_name(f"fwd-{node}")
                child = await self._spawn(node, name, self.node_argv(node))
                handles.append(SoloForwarder(node, child))
        else:
            by_group: dict[int, list[str]] = {}
            for node in nodes:
                by_group.setdefault(self.group_of[node], []).append(node)
            for group, members in by_group.items():
                live = self.hosts.get(group)
                if live is not None and live.running():
                    host = live
                else:  # the first start, or its host died (all its nodes with it)
                    host = await self._spawn_host(group, members)
                for node in members:
                    packed = PackedForwarder(node, self._log_name(f"fwd-{node}"), host)
                    if host is live:
                        packed.restart()
                    handles.append(packed)
        for h in handles:
            self.forwarders[h.node] = h
        return handles

    async def _spawn_host(self, group: int, start: list[str]) -> ForwarderHost:
        """A process for ``group``'s nodes (their plan written), ``start`` started at once."""
        nodes = self.groups[group]
        plan = Plan(
            control=self.backend.sock_dir / f"packed-{group}.ctl",
            log_level=_most_verbose([self.sc.nodes[n].forwarder.get("log_level") for n in nodes]),
            nodes={
                n: NodePlan(
                    self._config_path(n),
                    [self._spec_file(s, "service", None) for s in self._guests(n)],
                )
                for n in nodes
            },
        )
        path = self.out_dir / "config" / f"packed-{group}.json"
        path.write_text(json.dumps(plan.to_json(), indent=2))
        name = self._log_name(f"packed-{group}")
        child = await self._spawn(nodes[0], name, packed_argv(path, start))
        self.hosts[group] = host = ForwarderHost(child, plan.control)
        return host

    def _guests(self, node: str) -> list[ServiceSpec]:
        return [s for s in self.sc.services if s.node == node and s.colocate]

    def _spec_file(self, proc: ProcessSpec, kind: str, duration: float | None) -> Path:
        spec: dict[str, Any] = {
            "kind": kind,
            "name": proc.name,
            "node": proc.node,
            "entry": proc.entry,
            "args": proc.args,
            "transport": f"unix://{self.backend.unix_socket(proc.node)}",
            "run_dir": str(self.out_dir),
            "links": [list(ln.between) for ln in self.sc.links],
            "results": str(self.results_path(proc.name)),
        }
        if self.sc.metrics is not None:  # the process serves /metrics on its node's address
            spec["metrics_host"] = self.backend.listen_hosts(proc.node)[0]
        if kind == "workload":
            spec["duration"] = duration
            spec["start_at"] = time.time()
            spec["grace"] = WORKLOAD_GRACE
        self.results_path(proc.name).parent.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / "procs" / f"{proc.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.trust is not None:  # its private key inside: the file is its owner's alone
            spec["trust"] = self.trust.material(proc.name)
            path.touch(mode=0o600)
            path.chmod(0o600)
        path.write_text(json.dumps(spec, indent=2))
        return path

    def results_path(self, name: str) -> Path:
        return self.out_dir / "results" / f"{name}.jsonl"

    def _entry_argv(self, spec_path: Path) -> list[str]:
        return [sys.executable, "-m", "apps.scenario.entry", str(spec_path)]

    async def start_service(self, svc: ServiceSpec) -> None:
        """Start ``svc`` and wait until it says it is serving.  A co-located service was
        started with its node's forwarder: only the wait is left.  A service back after it
        stopped alone announces its prefixes again."""
        if svc.colocate:
            fwd = self.forwarders[svc.node]
            try:
                await colocated.wait_ready(fwd, svc.name, svc.ready_timeout)
            except (RuntimeError, TimeoutError) as exc:
                raise ScenarioFailed(f"{svc.name} (co-located in {fwd.name}): {exc}") from None
        else:
            argv = self._entry_argv(self._spec_file(svc, "service", None))
            child = await self._spawn(svc.node, self._log_name(svc.name), argv)
            self.procs[svc.name] = child
            self.watch_metrics(svc, child)
            await self._wait_for(child, ready_line(svc.name), svc.ready_timeout, "stdout")
        self.process_back(svc)

    def process_gone(self, proc: ProcessSpec, why: str) -> None:
        """``proc`` stopped while its node is up: withdraw what it announced (routes: auto)."""
        self.stopped.add(proc.name)
        if proc.announce and self.sc.routes == "auto":
            self.reroute_later(f"{_kind(proc)} {proc.name} {why}", failure=True)

    def process_back(self, proc: ProcessSpec) -> None:
        """``proc`` runs again after it stopped alone: announce its prefixes again."""
        if proc.name not in self.stopped:
            return
        self.stopped.discard(proc.name)
        if proc.announce and self.sc.routes == "auto":
            self.reroute_later(f"{_kind(proc)} {proc.name} back", failure=False)

    def workload_duration(self, wl: WorkloadSpec) -> float:
        left = self.sc.duration - wl.start
        return min(wl.duration, left) if wl.duration is not None else left

    def workload_left(self, wl: WorkloadSpec) -> float:
        """Seconds from now to the end of ``wl``'s span."""
        return wl.start + self.workload_duration(wl) - max(self.now(), wl.start)

    async def start_workload(self, wl: WorkloadSpec) -> None:
        """Start ``wl`` at its start time, or again after a kill for what is left of its span
        (its records append to the same results file)."""
        if wl.node in self.down:
            self.event(f"workload {wl.name} not started: node {wl.node} is down")
            return
        again = wl.name in self.procs
        duration = self.workload_left(wl) if again else self.workload_duration(wl)
        spec = self._spec_file(wl, "workload", duration)
        name = self._log_name(wl.name)
        self.procs[wl.name] = await self._spawn(wl.node, name, self._entry_argv(spec))
        self.watch_metrics(wl, self.procs[wl.name])
        self.event(f"workload {wl.name} {'restarted' if again else 'started'} on {wl.node}")
        self.process_back(wl)

    def procs_on(self, node: str) -> list[str]:
        return [p.name for p in [*self.sc.services, *self.sc.workloads] if p.node == node]

    # ---- routes ----------------------------------------------------------------------------

    async def reroute(self, reason: str) -> None:
        down_links = [frozenset(ln.between) for ln in self.sc.links if ln.name in self.fabric.cut]
        table = compute_routes(self.sc, self.down, down_links, self.stopped)
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
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                coro.close()  # the run ended first: never started, and not warned about
                raise
            try:
                await coro
            except (IcnError, TimeoutError, OSError) as exc:
                self.event(f"error: {exc}")

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- the timeline ----------------------------------------------------------------------

    async def monitor(self) -> None:
        """Notice forwarders, services and workloads that die on their own (not by a fault)."""
        reported: set[str] = set()
        while True:
            await asyncio.sleep(MONITOR_EVERY)
            for node, fwd in list(self.forwarders.items()):
                if node in self.expected_down or fwd.running():
                    continue
                self.down.add(node)
                self.expected_down.add(node)
                self.fabric.detach(node)
                self.event(f"node {node} crashed (exit code {fwd.exit_code()})")
                self.reroute_later(f"{node} crashed", failure=True)
            for proc in [*self.sc.services, *self.sc.workloads]:
                pchild = self.procs.get(proc.name)
                if pchild is None or proc.node in self.expected_down or pchild.proc.poll() is None:
                    continue
                key = f"{proc.name}:{pchild.pid}"
                code = pchild.proc.returncode
                is_service = isinstance(proc, ServiceSpec)
                if key in reported or pchild.pid in self.expected_exit:
                    continue
                reported.add(key)
                if code == 0 and not is_service:
                    continue
                last = (pchild.errors().strip().splitlines() or [""])[-1][:200]
                self._exited(proc, code, last)
            self._check_guests(reported)

    def _check_guests(self, reported: set[str]) -> None:
        """Co-located services say on their host's stdout when they end."""
        for node, fwd in list(self.forwarders.items()):
            if node in self.expected_down or not any(
                s.colocate and s.node == node for s in self.sc.services
            ):
                continue
            for name, code, reason in colocated.exited_services(fwd.output()):
                key = f"{name}:{fwd.name}"  # one start of the node (a packed one keeps its PID)
                svc = self.sc.service(name)
                if key in reported or svc is None:
                    continue
                reported.add(key)
                self._exited(svc, code, reason)

    def _exited(self, proc: ProcessSpec, code: int, reason: str) -> None:
        self.event(f"{_kind(proc)} {proc.name} exited with code {code}: {reason}".rstrip(": "))
        if isinstance(proc, ServiceSpec) or code != 0:  # a workload that ended is just done
            self.process_gone(proc, "exited")

    async def sampler(self) -> None:
        interval = self.sc.report.interval
        next_at = time.monotonic()
        while True:
            s = await metrics.sample_quietly(self.fabric, self.now(), self.forwarders)
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
        # A workload starts in a task of its own: a start that takes seconds (a loaded Ray
        # agent: 3.5 s once) must not delay the faults after it, which would then come late and
        # together (a cut planned for 2 s came at 4 s, with its restore, planned for 3 s, just
        # after it: no packet met the cut).  A fault that concerns a workload, or the node it
        # runs on, waits for that workload's start; faults go in order among themselves.
        starting: dict[str, asyncio.Task[None]] = {}
        for at, _, what in actions:
            await asyncio.sleep(max(0.0, at - self.now()))
            if isinstance(what, WorkloadSpec):
                starting[what.name] = asyncio.ensure_future(self.start_workload(what))
            else:
                waits = [t for name, t in starting.items() if self._concerns(what, name)]
                if waits:
                    await asyncio.gather(*waits)
                await apply_fault(self, what)
        if starting:
            await asyncio.gather(*starting.values())
        while (left := self.sc.duration - self.now()) > 0:
            if self.sc.stop_when_done and self.workloads_done():
                self.event("every workload has finished: the run ends (stop_when_done)")
                break
            await asyncio.sleep(min(left, 0.1))
        self.state.ended_at = self.now()

    def _concerns(self, fault: FaultSpec, workload: str) -> bool:
        """Whether ``fault`` acts on ``workload`` or on the node it runs on."""
        target = fault.target
        if not isinstance(target, str):
            return False  # a link
        wl = self.sc.workload(workload)
        return target == workload or (wl is not None and target == wl.node)

    def workloads_done(self) -> bool:
        """Every workload was started and its process has ended (faults are all applied by
        the time the timeline asks: they come first)."""
        for wl in self.sc.workloads:
            child = self.procs.get(wl.name)
            if child is None or child.proc.poll() is None:
                return False
        return bool(self.sc.workloads)

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
        for proc in self._processes():  # an --out reused from an earlier run: start afresh
            self.results_path(proc).unlink(missing_ok=True)
        self.record = RunRecord.create(self.run_id, self.sc.name, self.backend_kind, self.out_dir)
        if hasattr(self.backend, "record"):
            self.backend.record = self.record
        self.backend.setup()
        for node in self.sc.nodes:
            self._write_config(node)
        await self.start_nodes(list(self.sc.nodes))
        if self.sc.metrics is not None:
            self.event(f"metrics: Prometheus targets in {await self.publish_targets()}")
        n = len(self.groups)
        packed = f", {n} process{'es' if n > 1 else ''}" if self.per_process > 1 else ""
        self.event(f"{len(self.sc.nodes)} forwarders ready ({self.backend_kind} backend{packed})")
        await self.fabric.connect_links(self.sc.links)
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
            final = await metrics.sample_quietly(self.fabric, self.now(), self.forwarders)
            if final is not None:
                self.state.samples.append(final)
        finally:
            for task in [*background, *self._tasks]:
                task.cancel()
            for task in [*background, *self._tasks]:
                with contextlib.suppress(BaseException):
                    await task
            if self.relays is not None:
                await self.relays.close()
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
            ran_for=self.state.ended_at,
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

    def _processes(self) -> list[str]:
        return [p.name for p in [*self.sc.services, *self.sc.workloads]]

    def live_counts(self) -> tuple[int, int]:
        """(successes, failures) recorded so far by all workloads (for the live view)."""
        return self.live.update({w.name: self.results_path(w.name) for w in self.sc.workloads})

    def read_records(self) -> dict[str, list[dict[str, Any]]]:
        """Each service's and workload's results: operation records and metric lines."""
        return {name: results.read_rows(self.results_path(name)) for name in self._processes()}


def _most_verbose(levels: list[Any]) -> str:
    """The log level of a process hosting nodes set to ``levels`` (None: the default)."""
    order = ["debug", "info", "warning", "error"]
    known = [str(lv).lower() for lv in levels if str(lv).lower() in order] or ["info"]
    return min(known, key=order.index)


def _kind(proc: ProcessSpec) -> str:
    return "service" if isinstance(proc, ServiceSpec) else "workload"


def default_out_dir(sc: Scenario) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{sc.name}-{stamp}"


__all__ = ["ConfigError", "ScenarioFailed", "ScenarioRunner", "default_out_dir"]
