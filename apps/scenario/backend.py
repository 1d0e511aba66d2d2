"""Where a scenario's processes run: the Backend interface and the local backend.

A backend answers three questions for the runner: which address and port a node's forwarder
listens on and is reached at over each link, how to start a process "on" a node, and what to
build before and remove after a run.  The local backend (the default, no root) gives every node
its own 127.x.y.z address; links are UDP or TCP faces between those addresses, shaped in the
face layer.  The netns backend (:mod:`apps.scenario.netns`) gives every node a network namespace
and every link a veth pair.  The ray backend (:mod:`apps.scenario.ray_backend`) starts each
node's processes on a Ray cluster's machines.

Every child is started with PR_SET_PDEATHSIG, so no process outlives a launcher that is killed
outright; the runner also stops each one by its PID on every exit path.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from pathlib import Path

from apps.procs import Child
from apps.scenario.parent_death import die_with_parent
from apps.scenario.runs import remove_socket_dir, socket_dir
from apps.scenario.schema import LinkSpec, Scenario

FWD_PORT = 6363  # NDN's port: every forwarder's, unless several share an address


class Backend(ABC):
    """One run's placement of nodes and links.  ``setup`` before anything starts, ``teardown``
    after everything stopped (it must also work after a partial ``setup``)."""

    name: str
    # the children's PIDs are this machine's (the run record lists them for ``clean``)
    local_processes = True

    def __init__(self, scenario: Scenario, run_id: str, run_dir: Path) -> None:
        self.scenario = scenario
        self.run_id = run_id
        self.run_dir = run_dir

    @abstractmethod
    def setup(self) -> None: ...

    @abstractmethod
    def teardown(self) -> None: ...

    @abstractmethod
    def listen_hosts(self, node: str) -> list[str]:
        """IP addresses ``node``'s forwarder binds its UDP and TCP listeners to."""

    @abstractmethod
    def address_on(self, link: LinkSpec, node: str) -> str:
        """The address at which ``node`` is reached by its neighbor over ``link``."""

    def listen_port(self, node: str) -> int:
        """The UDP and TCP port of ``node``'s forwarder."""
        return FWD_PORT

    def argv_for(self, node: str, argv: list[str]) -> list[str]:
        """The command line that runs ``argv`` on ``node`` (e.g. inside its namespace)."""
        return argv

    def spawn(
        self, node: str, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> Child:
        """Start ``argv`` on ``node``; output goes to ``run_dir/logs/<name>.out|.err``."""
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return Child(name, self.argv_for(node, argv), logs, env, preexec_fn=die_with_parent)

    async def start(
        self, node: str, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> Child:
        """:meth:`spawn`, from the runner's event loop.  In line here: a local start is a fork
        and an exec, back in milliseconds, and waits on nothing the loop would have to run.  A
        backend whose start waits on another machine runs it off the loop."""
        return self.spawn(node, name, argv, env)

    @property
    def sock_dir(self) -> Path:
        """Where the nodes' Unix sockets live: short and fixed, whatever ``run_dir`` is, since a
        socket path may not exceed 107 bytes."""
        return socket_dir(self.run_id)

    def unix_socket(self, node: str) -> Path:
        """The node forwarder's Unix socket, where its apps and the launcher connect."""
        return self.sock_dir / f"{node}.sock"

    def mgmt_socket(self, node: str) -> Path:
        """Where the launcher reaches ``node``'s forwarder management (a local face)."""
        return self.unix_socket(node)

    def remove_sockets(self) -> None:
        remove_socket_dir(self.sock_dir)

    def resources(self) -> list[str]:
        """What ``teardown`` removes besides processes (for the run record and ``clean``)."""
        return []


class LocalBackend(Backend):
    """Each node on its own loopback address 127.<a>.<b>.<i+1>, with <a>.<b> drawn per run so
    two runs at once do not meet."""

    name = "local"

    def __init__(self, scenario: Scenario, run_id: str, run_dir: Path) -> None:
        super().__init__(scenario, run_id, run_dir)
        if len(scenario.nodes) > 250:
            raise ValueError("the local backend places at most 250 nodes")
        rng = random.Random(run_id)
        a, b = rng.randrange(1, 255), rng.randrange(0, 255)
        self.addresses = {node: f"127.{a}.{b}.{i + 1}" for i, node in enumerate(scenario.nodes)}

    def setup(self) -> None:
        self.sock_dir.mkdir(mode=0o755, parents=True, exist_ok=True)

    def teardown(self) -> None:
        self.remove_sockets()

    def listen_hosts(self, node: str) -> list[str]:
        return [self.addresses[node]]

    def address_on(self, link: LinkSpec, node: str) -> str:
        return self.addresses[node]
