"""A real Ray cluster of several Ray nodes on this one machine, for the ray backend's tests.

Each Ray node runs inside a network namespace this module creates, because Ray binds and
advertises a node's non-loopback address and the tests may send traffic only to loopback or to
namespaces they made.  The namespaces hang off one bridge namespace, each by a veth pair, on a
private /24 of this cluster's own; none has a route anywhere else.  Every Ray node gets its own
``--temp-dir``, no dashboard, no log monitor, a small object store and one CPU; the head starts
first, the others together.

Teardown stops the Ray processes by PID: every process inside each of the cluster's namespaces
(``ip netns pids``), never ``ray stop`` (which finds Ray processes by name, machine-wide).  Then
the namespaces and the temporary directory go.  It runs also when the start failed half-way.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GCS_PORT = 6379
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # about Ray's minimum
START_TIMEOUT = 120.0
RAYLET_LATE = "The current node timed out during startup"  # ray start's words
COMMAND_TIMEOUT = 20.0


def _ip(*args: str) -> str:
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


@dataclass
class RayNode:
    index: int
    namespace: str
    address: str
    labels: dict[str, str]
    temp_dir: Path

    def raylet_pid(self) -> int:
        """The PID of the node's raylet (the process inside its namespace named so)."""
        for tok in _ip("netns", "pids", self.namespace).split():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{tok}/comm").read_text().strip() == "raylet":
                    return int(tok)
        raise RuntimeError(f"no raylet runs in {self.namespace}")


@dataclass
class RayCluster:
    """``nodes[0]`` is the head; ``address`` is its GCS address (HOST:PORT)."""

    cluster_id: str = field(default_factory=lambda: secrets.token_hex(3))
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="icnray-")))
    nodes: list[RayNode] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @property
    def bridge_namespace(self) -> str:
        return f"icnray-{self.cluster_id}-br"

    @property
    def head(self) -> RayNode:
        return self.nodes[0]

    @property
    def tmp_dir(self) -> Path:
        """``$TMPDIR`` of the Ray nodes and of the launcher: the agents' folders and the
        launcher's socket folder end up here, inside the cluster's own directory."""
        return self.workdir / "tmp"

    @property
    def address(self) -> str:
        return f"{self.head.address}:{GCS_PORT}"

    def subnet(self) -> str:
        """The cluster's own /24 in 10.200.0.0/13, from its id (namespaces keep it private
        anyway: nothing here is routed outside them)."""
        n = int(self.cluster_id, 16)
        return f"10.{200 + n % 8}.{(n >> 3) % 256}"

    # ---- namespaces ------------------------------------------------------------------------

    def _add_namespace(self, name: str) -> None:
        self.namespaces.append(name)  # before it exists: teardown tries it whatever happens
        _ip("netns", "add", name)
        _ip("-n", name, "link", "set", "lo", "up")

    def make_network(self, count: int) -> None:
        br = self.bridge_namespace
        self._add_namespace(br)
        _ip("-n", br, "link", "add", "br0", "type", "bridge")
        _ip("-n", br, "link", "set", "br0", "up")
        for i in range(count):
            ns = f"icnray-{self.cluster_id}-n{i}"
            self._add_namespace(ns)
            inner, outer = f"ir{self.cluster_id}n{i}", f"ir{self.cluster_id}p{i}"
            _ip("link", "add", inner, "netns", ns, "type", "veth", "peer", "name", outer,
                "netns", br)  # fmt: skip
            _ip("-n", br, "link", "set", outer, "master", "br0")
            _ip("-n", br, "link", "set", outer, "up")
            address = f"{self.subnet()}.{i + 1}"
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            temp = self.workdir / f"n{i}"
            temp.mkdir()
            self.nodes.append(RayNode(i, ns, address, {"zone": f"z{i}"}, temp))

    # ---- Ray -------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TMPDIR": str(self.tmp_dir),
            "RAY_USAGE_STATS_ENABLED": "0",
            # Ray's own log lines stay in its temp dir, not on the test's output
            "RAY_LOG_TO_STDERR": "0",
            # the cluster is the test's own, within its namespaces: no tokens.  A token file
            # another program left in ~/.ray (ray.init writes one) made `ray start` fail with
            # "Authentication token is missing or incorrect" on every node
            "RAY_AUTH_MODE": "disabled",
        }

    def exec_argv(self, node: RayNode, argv: list[str]) -> list[str]:
        """``argv`` run inside ``node``'s namespace."""
        return ["ip", "netns", "exec", node.namespace, *argv]

    def start_argv(self, node: RayNode) -> list[str]:
        ray = str(Path(sys.executable).parent / "ray")
        labels = ",".join(f"{k}={v}" for k, v in node.labels.items())
        argv = [
            ray, "start", "--node-ip-address", node.address, "--temp-dir", str(node.temp_dir),
            "--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE_BYTES),
            "--disable-usage-stats", "--labels", labels,
            # it streams workers' output to drivers, which the launcher does not ask for
            "--include-log-monitor", "false",
        ]  # fmt: skip
        if node.index == 0:
            # no autoscaler (--no-monitor): nothing here scales
            argv += ["--head", "--port", str(GCS_PORT), "--include-dashboard=false", "--no-monitor"]
        else:
            argv += ["--address", self.address]
        return argv

    def start_nodes(self, nodes: list[RayNode]) -> None:
        """``ray start`` on each of ``nodes``, all at once; RuntimeError with the log of one
        that failed.  ``ray start`` gives up on a raylet that has not registered within 30 s
        (a fixed wait), which a loaded machine can exceed: then the node, started all the same,
        is waited for in the cluster's list of live nodes."""
        started = []
        late: list[RayNode] = []
        deadline = time.monotonic() + START_TIMEOUT
        try:
            for node in nodes:
                log = self.workdir / f"ray-start-n{node.index}.log"
                with open(log, "wb") as out:
                    proc = subprocess.Popen(
                        self.exec_argv(node, self.start_argv(node)),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        env=self.env(),
                    )
                started.append((node, proc, log))
            for node, proc, log in started:
                code = proc.wait(max(0.0, deadline - time.monotonic()))
                if code != 0 and RAYLET_LATE in log.read_text():
                    late.append(node)
                elif code != 0:
                    raise RuntimeError(
                        f"ray start on {node.namespace} failed:\n{log.read_text()[-3000:]}"
                    )
        finally:
            for _, proc, _ in started:  # a start that timed out or outlived a failed one
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(COMMAND_TIMEOUT)
        if late:
            self.wait_alive(late, max(1.0, deadline - time.monotonic()))

    def wait_alive(self, nodes: list[RayNode], timeout: float) -> None:
        """Until the cluster lists ``nodes`` as alive; RuntimeError after ``timeout``."""
        want = sorted(n.address for n in nodes)
        code = f"""
import time, ray
ray.init(address={self.address!r}, logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + {timeout}
while time.monotonic() < deadline:
    if set({want!r}) <= {{n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}}:
        print("alive")
        break
    time.sleep(0.5)
"""
        if "alive" not in self.python(code, timeout=timeout + COMMAND_TIMEOUT * 3):
            raise RuntimeError(f"the Ray nodes at {', '.join(want)} never registered")

    def start(self, count: int = 3) -> None:
        """The head, then the other nodes together."""
        self.tmp_dir.mkdir(exist_ok=True)
        self.make_network(count)
        self.start_nodes(self.nodes[:1])
        self.start_nodes(self.nodes[1:])

    def python(self, code: str, timeout: float = 60.0) -> str:
        """Run ``code`` with this interpreter in the head's namespace; its stdout."""
        done = subprocess.run(
            self.exec_argv(self.head, [sys.executable, "-c", code]),
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"python in {self.head.namespace} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    # ---- teardown --------------------------------------------------------------------------

    def pids(self) -> list[int]:
        found: list[int] = []
        existing = {ln.split()[0] for ln in _ip("netns", "list").splitlines() if ln.strip()}
        for ns in self.namespaces:
            if ns in existing:
                found += [int(tok) for tok in _ip("netns", "pids", ns).split() if tok.isdigit()]
        return found

    def teardown(self) -> list[str]:
        """Kill every process in the cluster's namespaces (by PID), delete the namespaces and
        the temporary directory.  Returns what could not be removed (empty when all went)."""
        left: list[str] = []
        for _ in range(20):  # a process may start one more as it dies: a few rounds, bounded
            try:
                pids = self.pids()
            except (RuntimeError, subprocess.SubprocessError) as exc:
                left.append(str(exc))
                break
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for ns in reversed(self.namespaces):
            try:
                _ip("netns", "del", ns)
            except RuntimeError as exc:
                if "No such file" not in str(exc):
                    left.append(str(exc))
        self.namespaces = [ns for ns in self.namespaces if ns in _namespaces()]
        left += [f"namespace {ns} remains" for ns in self.namespaces]
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.workdir.exists():
            left.append(f"{self.workdir} remains")
        return left


def _namespaces() -> set[str]:
    return {ln.split()[0] for ln in _ip("netns", "list").splitlines() if ln.strip()}
