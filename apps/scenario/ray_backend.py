"""The ray backend: a scenario's nodes on the machines of a Ray cluster.

``icn scenario run FILE --backend ray --ray-address HOST:PORT`` (or ``RAY_ADDRESS``; ``auto`` finds
a cluster this machine is part of) joins the cluster as a Ray driver, so the launcher runs on
one of its machines, usually the head.  Then, before anything starts:

* every scenario node gets a Ray node (:mod:`apps.scenario.ray_placement`: the scenario's
  ``placement:``, a label or custom resource per node, and the rest spread); a placement no
  live Ray node satisfies is refused, naming what exists;
* on it, a node agent (:class:`~apps.scenario.ray_agent.NodeAgent`, a Ray actor pinned there
  with NodeAffinitySchedulingStrategy, no CPU reserved) that starts the node's forwarder,
  services and workloads as its own children and reports on them.  It runs at its Ray node's
  own niceness (the raylet's): Ray puts its workers 15 below that by default, which the
  children would inherit, and beside any other load they then got a few per cent of a core
  (the first management command unanswered in its 4 s, the quickstart's consumer at 72
  requests/s instead of 190);
* each forwarder listens on its Ray node's address, on 6363 or the next port free there when
  several scenario nodes (or several runs) share a Ray node; links are UDP or TCP faces
  between those addresses, shaped in the faces as on ``local``;
* the launcher reaches each forwarder's management through a Unix socket in its socket folder,
  relayed to the agent over an authenticated TCP connection (:mod:`apps.scenario.ray_relay`),
  so routes, faults and counters go through the same ``unix://`` management as on ``local``.

The runner sees the remote processes as children (:mod:`apps.scenario.ray_child`), their logs
and results pulled into the output folder as they grow.  Cleanup: the runner stops every
process; ``teardown`` pulls what is left, has each agent kill what still runs and remove its
folder, then kills the agents.  A launcher killed outright takes its agents with it (Ray ends a
dead driver's actors) and they take their children (PR_SET_PDEATHSIG).

Ray is optional (``pip install -e .[ray]``) and imported only here, when a run starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from apps.scenario.backend import FWD_PORT, Backend
from apps.scenario.ray_agent import PYTHON, NodeAgent
from apps.scenario.ray_child import AgentGone, AgentMirror, RemoteChild
from apps.scenario.ray_placement import RayNode, live_nodes, place
from apps.scenario.ray_relay import RelayLoop, new_secret
from apps.scenario.schema import LinkSpec, Scenario
from icn.errors import ConfigError, IcnError

log = logging.getLogger(__name__)

ADDRESS_ENV = "RAY_ADDRESS"
PROBE_TIMEOUT = 5.0
AGENT_START_TIMEOUT = 90.0
AGENT_STOP_TIMEOUT = 15.0
MIRROR_JOIN_TIMEOUT = 5.0
COLLECT_BYTES = 64 << 20  # per agent: the files processes wrote besides logs and results
MAX_CONCURRENCY = 8  # an agent answers a wait and the log pulls at once
# how much nicer than its raylet a Ray worker makes itself as it starts (15 by default); Ray's
# own job supervisor asks for 0 this way too
WORKER_NICENESS = {"RAY_worker_niceness": "0"}


class AgentError(IcnError):
    """A node agent refused a call (a process already running under that name...)."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"the ray backend needs Ray, which is not installed here ({exc}): install the "
            "project's ray extra, pip install -e .[ray]"
        ) from None
    return ray


def cluster_address(address: str | None) -> str:
    found = address or os.environ.get(ADDRESS_ENV)
    if not found:
        raise ConfigError(
            "the ray backend needs a Ray cluster's address: --ray-address HOST:PORT (its head's "
            f"GCS port, 6379 unless changed) or {ADDRESS_ENV}"
        )
    return found


def probe(address: str) -> None:
    """Fail at once, naming ``address``, when nothing listens there (Ray itself would retry
    for about a minute before saying so)."""
    if address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r}: write HOST:PORT, e.g. 10.0.0.1:6379")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT).close()
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {address} ({exc}): start one (ray start --head) or "
            f"give its head's address with --ray-address HOST:PORT or {ADDRESS_ENV}"
        ) from None


class ActorCalls:
    """Calls to one agent actor (:class:`~apps.scenario.ray_child.AgentCalls`)."""

    def __init__(self, ray: Any, actor: Any, node: str) -> None:
        self.ray = ray
        self.actor = actor
        self.node = node

    def __call__(self, method: str, *args: Any, timeout: float) -> Any:
        exc_types = self.ray.exceptions
        ref = getattr(self.actor, method).remote(*args)
        try:
            return self.ray.get(ref, timeout=timeout)
        except (exc_types.GetTimeoutError, exc_types.ActorUnavailableError):
            raise TimeoutError(
                f"node {self.node}: its agent did not answer {method} within {timeout:g} s"
            ) from None
        except exc_types.RayActorError as exc:
            raise AgentGone(f"node {self.node}: {str(exc).strip().splitlines()[0]}") from None
        except exc_types.RayTaskError as exc:
            cause = exc.cause if exc.cause is not None else exc
            raise AgentError(f"node {self.node}: {method}: {cause}") from None


class RayBackend(Backend):
    """Each node's processes on a Ray node, through its agent.  ``address``: the cluster's
    (else ``$RAY_ADDRESS``)."""

    name = "ray"
    local_processes = False  # PIDs on other machines: never the run record's to kill

    def __init__(
        self, scenario: Scenario, run_id: str, run_dir: Path, address: str | None = None
    ) -> None:
        super().__init__(scenario, run_id, run_dir)
        self.address = address
        self.secret = new_secret()
        self.places: dict[str, RayNode] = {}
        self.ports: dict[str, int] = {}
        self.agents: dict[str, Any] = {}
        self.mirrors: dict[str, AgentMirror] = {}
        self.remote: dict[str, dict[str, Any]] = {}  # node -> its agent's info()
        self._ray: Any = None
        self._relay: RelayLoop | None = None

    # ---- setup -----------------------------------------------------------------------------

    def setup(self) -> None:
        self.sock_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        ray = import_ray()
        address = cluster_address(self.address)
        probe(address)
        self._connect(ray, address)
        self.places = place(self.scenario, live_nodes(ray.nodes()))
        self._start_agents(ray, address)
        self._pick_ports()
        self._relay = RelayLoop(f"relay-{self.run_id}")
        for node in self.scenario.nodes:
            self._relay.run(
                self._relay.serve_launcher(
                    self.mgmt_socket(node),
                    self.places[node].address,
                    int(self.remote[node]["relay_port"]),
                    self.secret,
                )
            )
        self._write_placement()

    def _connect(self, ray: Any, address: str) -> None:
        # ray.init installs a SIGTERM handler of its own (exit at once); the launcher's (stop
        # everything, then exit) must stay
        main = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGTERM) if main else None
        try:
            ray.init(
                address=address,
                namespace=f"icn-{self.run_id}",
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
            raise ConfigError(f"could not join the Ray cluster at {address}: {exc}") from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        self._ray = ray

    def _start_agents(self, ray: Any, address: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        agent_class = ray.remote(NodeAgent)
        for node, ray_node in self.places.items():
            self.agents[node] = agent_class.options(
                num_cpus=0,
                max_concurrency=MAX_CONCURRENCY,
                max_restarts=0,
                name=f"agent-{node}",
                scheduling_strategy=NodeAffinitySchedulingStrategy(ray_node.node_id, soft=False),
                runtime_env={"env_vars": dict(WORKER_NICENESS)},
            ).remote(self.run_id, node, ray_node.address, self.secret)
        nodes = list(self.agents)
        try:
            infos = ray.get(
                [self.agents[n].info.remote() for n in nodes], timeout=AGENT_START_TIMEOUT
            )
        except ray.exceptions.GetTimeoutError:
            raise ConfigError(
                f"the node agents did not start within {AGENT_START_TIMEOUT:g} s on the Ray "
                f"cluster at {address} (each needs a Ray worker process on its node)"
            ) from None
        except ray.exceptions.RayError as exc:
            raise ConfigError(f"a node agent failed to start at {address}: {exc}") from None
        for node, info in zip(nodes, infos, strict=True):
            self.remote[node] = info
            mirror = AgentMirror(node, ActorCalls(ray, self.agents[node], node), self.run_dir)
            mirror.start()
            self.mirrors[node] = mirror

    def _pick_ports(self) -> None:
        """6363 for the first scenario node on a Ray node's address, the next free port for
        the others (each agent holds the port it picked, see ``ray_agent.hold_port``; asked one
        at a time, so the first node in the file gets 6363)."""
        for node in self.scenario.nodes:
            self.ports[node] = int(self.mirrors[node].call("pick_port", FWD_PORT))

    def _write_placement(self) -> None:
        placement = {
            node: {
                "ray_node": self.places[node].node_id,
                "address": self.places[node].address,
                "port": self.ports[node],
                "hostname": self.remote[node].get("hostname"),
                "agent_pid": self.remote[node].get("pid"),
            }
            for node in self.scenario.nodes
        }
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "placement.json").write_text(json.dumps(placement, indent=2) + "\n")

    # ---- the plan --------------------------------------------------------------------------

    def listen_hosts(self, node: str) -> list[str]:
        return [self.places[node].address]

    def address_on(self, link: LinkSpec, node: str) -> str:
        return self.places[node].address

    def listen_port(self, node: str) -> int:
        return self.ports[node]

    def unix_socket(self, node: str) -> Path:
        """The forwarder's socket on its own machine (its services connect there)."""
        return Path(self.remote[node]["socket"])

    def mgmt_socket(self, node: str) -> Path:
        """The launcher's relay to that socket."""
        return self.sock_dir / f"{node}.sock"

    # ---- processes -------------------------------------------------------------------------

    def spawn(
        self, node: str, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> RemoteChild:
        remote_argv, files = self._ship(argv, str(self.remote[node]["run_dir"]))
        return self.mirrors[node].spawn(name, remote_argv, env or {}, files, argv)

    async def start(
        self, node: str, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> RemoteChild:
        """The agent's start answers when its process runs on its machine, seconds later on a
        busy cluster: meanwhile the runner's timeline, sampler and monitor go on.  A thread,
        not Ray's awaitable ObjectRefs, since :meth:`AgentMirror.spawn` holds the mirror's lock
        across the call (its pull thread must meet the fresh log files with their offsets)
        and that lock is a threading one, which the loop never takes (``poll`` answers from
        the last pull, signals go through the poster thread), so it must never be held on the
        loop either.  A start whose run is cancelled meanwhile goes on in its thread; what it
        started, the agent kills at teardown with whatever else still runs there."""
        return await asyncio.to_thread(self.spawn, node, name, argv, env)

    def _ship(self, argv: list[str], remote_run: str) -> tuple[list[str], dict[str, bytes]]:
        """``argv`` for the agent's machine: this interpreter becomes the agent's, and every
        argument that is a file in the output folder (a forwarder config, a spec) is shipped,
        with the output folder's path in it and in the arguments replaced by the agent's."""
        local = self.run_dir.resolve()
        forms = sorted({str(self.run_dir), str(local)}, key=len, reverse=True)

        def rewrite(text: str) -> str:
            for form in forms:
                text = text.replace(form, remote_run)
            return text

        files: dict[str, bytes] = {}
        out: list[str] = []
        for i, arg in enumerate(argv):
            if i == 0 and arg == sys.executable:
                out.append(PYTHON)
                continue
            path = Path(arg)
            if path.is_file() and path.resolve().is_relative_to(local):
                rel = path.resolve().relative_to(local).as_posix()
                files[rel] = rewrite(path.read_text()).encode()
                out.append(f"{remote_run}/{rel}")
                continue
            out.append(rewrite(arg))
        return out, files

    # ---- teardown --------------------------------------------------------------------------

    def teardown(self) -> None:
        """Pull the last logs, results and other files; each agent kills what still runs and
        removes its folder; the agents are killed; the relay and sockets go.  Works after a
        partial setup, and a second call does nothing."""
        for mirror in self.mirrors.values():
            mirror.stop()
        for node, mirror in self.mirrors.items():
            try:
                mirror.sync()
                skipped = mirror.collect(COLLECT_BYTES)
            except (IcnError, TimeoutError) as exc:
                log.warning("node %s: its last files were not pulled: %s", node, exc)
                continue
            if skipped:
                log.warning("node %s: files left on its machine: %s", node, ", ".join(skipped))
        ray = self._ray
        if ray is not None:
            stops = [agent.shutdown.remote() for agent in self.agents.values()]
            with contextlib.suppress(Exception):
                ray.get(stops, timeout=AGENT_STOP_TIMEOUT)
            for agent in self.agents.values():
                with contextlib.suppress(Exception):
                    ray.kill(agent, no_restart=True)
        # their last pulls ended with the shutdowns (or fail with the kills): before Ray goes
        deadline = time.monotonic() + MIRROR_JOIN_TIMEOUT
        for mirror in self.mirrors.values():
            mirror.join(max(0.0, deadline - time.monotonic()))
        self.mirrors.clear()
        self.agents.clear()
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        self.remove_sockets()
        if ray is not None:
            self._ray = None
            with contextlib.suppress(Exception):
                ray.shutdown()
