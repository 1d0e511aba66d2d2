"""The ray backend's parts on this machine, without a Ray cluster: the authenticated management
relay (on loopback), a node agent run as a plain object with the launcher's mirror of its
processes, its children dying with it, and the launcher's errors when no cluster answers.
The whole backend on a real cluster: test_ray_backend.py."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.procs import icn_argv
from apps.scenario import ray_agent, ray_relay
from apps.scenario.backend import FWD_PORT
from apps.scenario.ray_agent import PYTHON, NodeAgent, sweep
from apps.scenario.ray_backend import probe
from apps.scenario.ray_child import AgentGone, AgentMirror
from apps.scenario.ray_relay import RelayLoop, new_secret
from apps.scenario.runs import proc_start_time
from icn.errors import ConfigError
from tests.integration.scenario.conftest import SCENARIOS, pid_alive

ROOT = Path(__file__).resolve().parents[3]


def wait_until(check: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


class EchoServer:
    """A Unix socket standing for a forwarder's: echoes, and counts the connections it got."""

    def __init__(self, path: Path) -> None:
        self.accepted = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            while data := conn.recv(4096):
                conn.sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def unix_client(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(path))
    return s


def closed_after(c: socket.socket, data: bytes) -> bool:
    """Whether the other end closes ``c`` after (or before: a busy machine) ``data`` is sent,
    with nothing coming back."""
    try:
        c.sendall(data)
        return c.recv(100) == b""
    except (BrokenPipeError, ConnectionResetError):
        return True


@pytest.fixture
def loops() -> Iterator[list[RelayLoop]]:
    made: list[RelayLoop] = []
    yield made
    for loop in made:
        loop.close()


def test_relay_passes_only_authenticated_connections(
    tmp_path: Path, loops: list[RelayLoop], monkeypatch: pytest.MonkeyPatch
) -> None:
    echo = EchoServer(tmp_path / "fwd.sock")
    try:
        secret = new_secret()
        node = RelayLoop("node")
        loops.append(node)
        port = node.run(node.serve_node("127.0.0.1", secret, tmp_path / "fwd.sock"))
        launcher = RelayLoop("launcher")
        loops.append(launcher)
        mgmt = tmp_path / "a.sock"
        launcher.run(launcher.serve_launcher(mgmt, "127.0.0.1", port, secret))
        assert stat.S_IMODE(mgmt.stat().st_mode) == 0o600  # the launcher's user only

        # the launcher's half: both ways, a large message too
        with unix_client(mgmt) as c:
            payload = os.urandom(300_000)
            c.sendall(payload)
            got = b""
            while len(got) < len(payload):
                got += c.recv(65536)
            assert got == payload
        assert echo.accepted == 1

        # a launcher half with the wrong secret: closed, the forwarder never reached
        wrong = RelayLoop("wrong")
        loops.append(wrong)
        wrong.run(wrong.serve_launcher(tmp_path / "w.sock", "127.0.0.1", port, new_secret()))
        with unix_client(tmp_path / "w.sock") as c:
            assert closed_after(c, b"a management command")

        # a client that skips the handshake and sends packets: closed, nothing relayed
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            nonce = c.recv(ray_relay.NONCE_BYTES)
            assert len(nonce) == ray_relay.NONCE_BYTES
            c.sendall(b"\x05" * 64)
            assert c.recv(100) == b""

        # one that says nothing: closed at the handshake's deadline
        monkeypatch.setattr(ray_relay, "HANDSHAKE_TIMEOUT", 0.5)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.recv(ray_relay.NONCE_BYTES)
            t0 = time.monotonic()
            assert c.recv(100) == b""
            assert time.monotonic() - t0 < 5
        assert echo.accepted == 1
    finally:
        echo.close()


CHILD = r"""
import signal, sys, time, os
data = open(sys.argv[1]).read()
print("got", data, flush=True)
with open("results/w.jsonl", "a") as f:
    f.write('{"ok": true}\n')
os.makedirs("state", exist_ok=True)
open("state/checkpoint", "w").write("cp")
print("env", os.environ.get("ICN_TEST_X"), file=sys.stderr, flush=True)
def term(*_):
    print("terminated", file=sys.stderr, flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, term)
time.sleep(60)
"""


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NodeAgent]:
    agent_tmp = tmp_path / "agent-tmp"
    agent_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(agent_tmp))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    made = NodeAgent("0a1b2c", "a", "127.0.0.1", new_secret())
    yield made
    made.shutdown()


def direct(agent: NodeAgent) -> Any:
    def call(method: str, *args: Any, timeout: float) -> Any:
        return getattr(agent, method)(*args)

    return call


def test_agent_runs_processes_the_launcher_sees_as_children(
    agent: NodeAgent, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    mirror = AgentMirror("a", direct(agent), out)
    mirror.start()
    try:
        argv = [PYTHON, "-c", CHILD, "procs/in.txt"]
        files = {"procs/in.txt": b"hello"}
        child = mirror.spawn("w", argv, {"ICN_TEST_X": "42"}, files, ["shown"])
        assert agent.base.is_relative_to(tmp_path / "agent-tmp")
        child.wait_for("got hello", 15, "stdout")  # the mirrored log, in the output folder
        assert child.stdout_path == out / "logs" / "w.out"
        assert wait_until(lambda: "env 42" in child.errors())
        assert wait_until(lambda: (out / "results" / "w.jsonl").exists())
        assert (out / "results" / "w.jsonl").read_text() == '{"ok": true}\n'
        assert child.proc.poll() is None and child.pid == agent._procs["w"].pid
        with pytest.raises(ValueError, match="already running"):
            mirror.spawn("w", argv, {}, files, ["shown"])
        assert child.stop(grace=5) == 3  # SIGTERM through the agent, the code it exited with
        assert "terminated" in child.errors()  # its last words pulled before the code
        assert child.proc.poll() == 3 and child.proc.returncode == 3

        quick = mirror.spawn("q", [PYTHON, "-c", "print('bye'); raise SystemExit(7)"], {}, {}, [])
        assert quick.wait(10) == 7 and quick.output() == "bye\n"
        sleeper = mirror.spawn("s", ["sleep", "30"], {}, {}, [])
        with pytest.raises(subprocess.TimeoutExpired):
            sleeper.proc.wait(0.2)
        sleeper.proc.kill()
        assert sleeper.proc.wait(5) == -signal.SIGKILL
        # the monitor polls: the pulls see an exit without a wait
        again = mirror.spawn("e", [PYTHON, "-c", "raise SystemExit(5)"], {}, {}, [])
        assert wait_until(lambda: again.proc.poll() == 5)

        assert mirror.collect(1 << 20) == []
        assert (out / "state" / "checkpoint").read_text() == "cp"
        assert mirror.collect(0) == ["state/checkpoint"]
    finally:
        mirror.stop()
        agent.shutdown()  # ends the pull under way
        mirror.join(5)


WRITER = r"""
import sys, time
time.sleep(float(sys.argv[1]))
print("late", flush=True)
"""

RESULTS_WRITER = r"""
import time
with open("results/r.jsonl", "a") as f:
    for _ in range(200):
        f.write('{"ok": true}\n')
        f.flush()
        time.sleep(0.02)
"""


def timed_sync(agent: NodeAgent, running: list[str], wait: float) -> tuple[float, dict[str, Any]]:
    offsets = {
        p.relative_to(agent.run_dir).as_posix(): p.stat().st_size
        for sub in ("logs", "results")
        for p in (agent.run_dir / sub).rglob("*")
        if p.is_file()
    }
    t0 = time.monotonic()
    got = agent.sync(offsets, running, wait)
    return time.monotonic() - t0, got


def test_a_pull_waits_on_the_agent_until_there_is_something_new(
    agent: NodeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So an idle node costs the launcher a call every few seconds, not ten a second."""
    monkeypatch.setattr(ray_agent, "RESULTS_EVERY", 0.5)
    agent.spawn("idle", ["sleep", "30"], {}, {})
    took, got = timed_sync(agent, ["idle"], 0.4)  # nothing new: the whole wait
    assert 0.35 <= took < 5 and got["files"] == {} and got["exits"] == {"idle": None}

    agent.spawn("w", [PYTHON, "-c", WRITER, "0.3"], {}, {})
    took, got = timed_sync(agent, ["idle", "w"], 20)  # a log line: at once
    assert took < 10 and got["files"] == {"logs/w.out": (0, b"late\n")}
    took, got = timed_sync(agent, ["idle", "w"], 20)  # an end: at once
    assert took < 10 and got["exits"]["w"] == 0 and got["files"] == {}

    agent.spawn("r", [PYTHON, "-c", RESULTS_WRITER], {}, {})
    time.sleep(0.2)
    took, got = timed_sync(agent, ["idle", "r"], 20)  # results alone: after RESULTS_EVERY
    assert ray_agent.RESULTS_EVERY - 0.05 <= took < 10, took
    assert list(got["files"]) == ["results/r.jsonl"]

    box: list[float] = []
    waiting = threading.Thread(target=lambda: box.append(timed_sync(agent, ["idle"], 20)[0]))
    waiting.start()
    time.sleep(0.3)
    agent.shutdown()  # ends a pull under way
    waiting.join(10)
    assert box and box[0] < 5


def test_the_launcher_pulls_an_idle_agent_seldom(agent: NodeAgent, tmp_path: Path) -> None:
    calls: list[str] = []

    def counting(method: str, *args: Any, timeout: float) -> Any:
        calls.append(method)
        return getattr(agent, method)(*args)

    mirror = AgentMirror("a", counting, tmp_path / "out")
    child = mirror.spawn("w", [PYTHON, "-c", WRITER, "1.2"], {}, {}, [])
    mirror.start()
    try:
        child.wait_for("late", 15, "stdout")
        assert calls.count("sync") <= 3, calls  # one every 0.1 s before: 12
        assert wait_until(lambda: child.proc.poll() == 0)
    finally:
        mirror.stop()
        agent.shutdown()
        mirror.join(5)


def test_overlapping_pulls_write_each_byte_once(tmp_path: Path) -> None:
    """The mirror's pull and a wait's last pull may both bring the same bytes."""
    answers = [
        {"exits": {}, "files": {"logs/w.out": (0, b"abc")}},
        {"exits": {}, "files": {"logs/w.out": (0, b"abcdef")}},  # asked before the first came
        {"exits": {}, "files": {"logs/w.out": (3, b"de")}},  # older than what is here
        {"exits": {"w": 0}, "files": {"logs/w.out": (6, b"g\n")}},
    ]

    def call(method: str, *args: Any, timeout: float) -> Any:
        return 4242 if method == "spawn" else answers.pop(0)

    mirror = AgentMirror("a", call, tmp_path)
    child = mirror.spawn("w", ["prog"], {}, {}, ["prog"])
    for _ in range(4):
        mirror.sync()
    assert child.output() == "abcdefg\n" and child.proc.poll() == 0


def test_agent_kills_what_runs_at_shutdown_and_removes_its_folder(agent: NodeAgent) -> None:
    pid = agent.spawn("s", ["sleep", "30"], {}, {})
    # started from a thread that ends at once: the child must not get the parent-death signal
    # then (it follows the thread that started it), only when the agent goes
    box: list[int] = []
    t = threading.Thread(target=lambda: box.append(agent.spawn("t", ["sleep", "30"], {}, {})))
    t.start()
    t.join(10)
    time.sleep(0.3)
    assert pid_alive(pid) and pid_alive(box[0])
    base = agent.base
    agent.shutdown()
    assert wait_until(lambda: not pid_alive(pid) and not pid_alive(box[0]), 5)
    assert not base.exists()


def test_agent_picks_a_port_free_for_udp_and_tcp_that_it_holds(agent: NodeAgent) -> None:
    first = agent.pick_port(FWD_PORT)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        held.bind(("127.0.0.1", first + 1))  # UDP taken: TCP alone is not enough
        second = agent.pick_port(FWD_PORT)  # its own first pick is held
    assert first < second != first + 1
    assert agent.pick_port(first) not in (first, second)


def test_two_agents_on_a_machine_never_pick_the_same_port(agent: NodeAgent) -> None:
    """Two runs on one cluster: a port one agent picked is held until that agent ends, even
    while nothing listens on it (the forwarder not started yet, or killed by a fault)."""
    base = FWD_PORT + 700  # apart from the other test's ports, should the two run at once
    other = NodeAgent("d4e5f6", "b", "127.0.0.1", new_secret())
    try:
        mine = agent.pick_port(base)
        assert other.pick_port(base) != mine
    finally:
        other.shutdown()
    again = NodeAgent("d4e5f6", "c", "127.0.0.1", new_secret())
    try:
        agent.shutdown()  # its holds go with it
        assert again.pick_port(mine) == mine
    finally:
        again.shutdown()


def test_a_new_agent_removes_the_folders_of_dead_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait(10)
    dead = tmp_path / "icn-ray-0a1b2c-a-dead"
    live = tmp_path / "icn-ray-0a1b2c-b-live"
    unowned = tmp_path / "icn-ray-0a1b2c-c-being-made"
    for path in (dead, live, unowned):
        path.mkdir()
    (dead / "agent").write_text(f"{gone.pid} 12345\n")
    (live / "agent").write_text(f"{os.getpid()} {proc_start_time(os.getpid())}\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    agent = NodeAgent("d4e5f6", "x", "127.0.0.1", new_secret())
    try:
        assert not dead.exists() and live.exists() and unowned.exists()
        assert agent.base.exists() and sweep(tmp_path) == []  # its own folder: live
    finally:
        agent.shutdown()


AGENT_PROCESS = """
import sys, time
from apps.scenario.ray_agent import NodeAgent
from apps.scenario.ray_relay import new_secret
agent = NodeAgent("0a1b2c", "a", "127.0.0.1", new_secret())
print(agent.spawn("s", ["sleep", "60"], {}, {}), flush=True)
time.sleep(60)
"""


def test_an_agent_killed_outright_takes_its_children(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", AGENT_PROCESS], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert pid_alive(child)
        proc.kill()  # as Ray kills an agent whose launcher died
        proc.wait(10)
        assert wait_until(lambda: not pid_alive(child), 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_cluster_at_the_address_is_named() -> None:
    port = closed_port()
    with pytest.raises(ConfigError) as info:
        probe(f"127.0.0.1:{port}")
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in str(info.value)
    assert "--ray-address HOST:PORT or RAY_ADDRESS" in str(info.value)
    with pytest.raises(ConfigError, match="write HOST:PORT"):
        probe("headnode")


def test_cli_names_the_address_no_cluster_answers_at(tmp_path: Path, state_dir: Path) -> None:
    port = closed_port()
    base = icn_argv("scenario", "run", str(SCENARIOS / "quickstart.yaml"), "--out")
    env = {**os.environ, "COLUMNS": "200"}
    argv = [*base, str(tmp_path / "out"), "--backend", "ray", "--ray-address", f"127.0.0.1:{port}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert not list(state_dir.glob("*.json"))  # the run record finished: nothing left
    assert not (tmp_path / "out" / "logs").exists()  # nothing started

    argv = [*base, str(tmp_path / "out2"), "--ray-address", f"127.0.0.1:{port}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2 and "--ray-address is the Ray cluster's" in done.stderr


def test_processes_of_an_agent_that_died_count_as_killed(tmp_path: Path) -> None:
    agent_alive = [True]

    def call(method: str, *args: Any, timeout: float) -> Any:
        if not agent_alive[0]:
            raise AgentGone("node a: the actor died")
        if method == "spawn":
            return 4242
        if method == "sync":
            return {"exits": {"w": None}, "files": {"logs/w.err": (0, b"started\n")}}
        return None

    mirror = AgentMirror("a", call, tmp_path)
    child = mirror.spawn("w", ["prog"], {}, {}, ["prog"])
    mirror.sync()
    assert child.errors() == "started\n" and child.proc.poll() is None and child.pid == 4242
    agent_alive[0] = False
    child.proc.send_signal(signal.SIGUSR1)  # to a dead agent: no error, the process is gone
    assert wait_until(lambda: child.proc.poll() == -signal.SIGKILL)
    assert child.proc.wait(1) == -signal.SIGKILL and child.stop(1) == -signal.SIGKILL
    with pytest.raises(AgentGone):
        mirror.sync()


def test_signals_go_without_waiting_for_the_agent_in_order(tmp_path: Path) -> None:
    """The runner signals from its event loop: SIGUSR1 to every forwarder at each sample."""
    got: list[int] = []
    sent = threading.Event()

    def call(method: str, *args: Any, timeout: float) -> Any:
        if method == "spawn":
            return 4242
        if method == "signal":
            # a busy cluster: the agent answers only once both signals were sent, which a
            # sender that waited for its answer never gets to (it fails after 10 s instead)
            if not sent.wait(10):
                raise TimeoutError("the signal's sender waited for the agent's answer")
            got.append(args[1])
            return True
        return None

    mirror = AgentMirror("a", call, tmp_path)
    child = mirror.spawn("w", ["prog"], {}, {}, ["prog"])
    child.proc.send_signal(signal.SIGUSR1)
    child.proc.terminate()
    sent.set()
    assert wait_until(lambda: len(got) == 2) and got == [signal.SIGUSR1, signal.SIGTERM]
    mirror.join(1)
