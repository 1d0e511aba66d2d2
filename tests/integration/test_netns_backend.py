"""The netns backend on the real kernel: namespaces, veths, forwarders across a link, clean.

Needs root and the ``ip`` command (CI has both, and fails without them; skipped elsewhere, see
tests/needs.py).  Records go to a temporary state directory, and ``clean`` is shown only this
test's namespaces, so scenarios running on the machine at the same time are never touched.
Every process is stopped by PID.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import yaml

from apps.procs import Child, icn_argv
from apps.scenario import netns, runs
from apps.scenario.netns import NetnsBackend
from apps.scenario.runs import RunRecord, clean, list_namespaces, proc_start_time
from apps.scenario.schema import Scenario
from icn.dataplane.client_conf import ENV_VAR
from icn.errors import ConfigError
from tests.needs import is_root_with, needs

pytestmark = needs(is_root_with("ip"), "the netns backend needs root and the ip command (iproute2)")

TWO_NODES = {
    "name": "t",
    "backend": "netns",
    "nodes": {"a": {}, "b": {}},
    "links": [{"between": ["a", "b"]}],
}
PAYLOAD = b"hello over a veth\n"

ECHO_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 7777))
print("ready", flush=True)
data, peer = s.recvfrom(2048)
s.sendto(data, peer)
print("peer", peer[0], flush=True)
"""
ECHO_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(b"ping", (sys.argv[1], 7777))
print(s.recvfrom(2048)[0].decode())
"""


@pytest.fixture
def run_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh run id, a private state directory, and ``clean`` limited to this run's
    namespaces; whatever the test leaves is removed by PID and name afterwards."""
    rid = secrets.token_hex(3)
    monkeypatch.setenv(runs.STATE_ENV, str(tmp_path / "state"))
    real = runs.list_namespaces
    monkeypatch.setattr(
        runs, "list_namespaces", lambda: [n for n in real() if n.startswith(f"icn-{rid}-")]
    )
    try:
        yield rid
    finally:
        for ns in real():
            if ns.startswith(f"icn-{rid}-"):
                runs.remove_namespace(ns)


def ours(rid: str) -> list[str]:
    return [n for n in list_namespaces() if n.startswith(f"icn-{rid}-")]


def stop_all(children: list[Child]) -> None:
    for child in reversed(children):
        child.stop(grace=3)


def wait_until(
    cond: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path | None = None
) -> None:
    deadline = time.monotonic() + 15
    while not cond():
        why = log.read_text() if log else ""
        assert proc.poll() is None, f"exited with {proc.returncode}: {why}"
        assert time.monotonic() < deadline, f"not within 15 s: {why}"
        time.sleep(0.05)


def write_config(path: Path, data: Mapping[str, object]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_link_carries_udp_and_interests(run_id: str, tmp_path: Path) -> None:
    sc = Scenario.model_validate(TWO_NODES)
    run_dir = tmp_path / "run"
    be = NetnsBackend(sc, run_id, run_dir)
    link = sc.links[0]
    addr_a, addr_b = be.address_on(link, "a"), be.address_on(link, "b")
    children: list[Child] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        be.setup()
        assert sorted(ours(run_id)) == [f"icn-{run_id}-a", f"icn-{run_id}-b"]
        assert be.record is not None and be.record.path.is_file()
        assert be.record.namespaces == be.resources()
        assert be.sock_dir.is_dir()
        print(f"netem available: {be.netem}")
        if not be.netem:
            assert be.netem_apply(link, 0.01, 0.0, 0.0, None) is False

        # plain UDP across the veth pair; the server sees a's address on the link
        echo = be.spawn("b", "echo", [sys.executable, "-c", ECHO_SERVER, addr_b])
        children.append(echo)
        echo.wait_for("ready", timeout=10, stream="stdout")
        # ip netns exec execs the program: the child's PID is python's, not ip's
        assert Path(f"/proc/{echo.pid}/exe").resolve() == Path(sys.executable).resolve()
        reply = subprocess.run(
            be.argv_for("a", [sys.executable, "-c", ECHO_CLIENT, addr_b]),
            capture_output=True,
            timeout=15,
            check=True,
        )
        assert reply.stdout.decode().strip() == "ping"
        echo.wait_for(f"peer {addr_a}", timeout=5, stream="stdout")
        assert echo.wait(5) == 0
        # the root namespace has no route to the link: isolation
        lonely = subprocess.run(
            [sys.executable, "-c", ECHO_CLIENT.replace("settimeout(5)", "settimeout(0.3)"), addr_b],
            capture_output=True,
            timeout=15,
        )
        assert lonely.returncode != 0

        # two forwarders on 0.0.0.0; a routes /x to b over the link
        host = be.listen_hosts("a")[0]
        face_b, face_a = f"udp4://{addr_b}:6363", f"udp4://{addr_a}:6363"
        conf_a = {
            "listen": {"udp": [f"{host}:6363"], "unix": str(be.unix_socket("a"))},
            "faces": [{"uri": face_b}],
            "routes": [{"prefix": "/x", "face": face_b}],
        }
        conf_b = {
            "listen": {
                "udp": [f"{be.listen_hosts('b')[0]}:6363"],
                "unix": str(be.unix_socket("b")),
            },
            "faces": [{"uri": face_a}],
        }
        for node, conf in (("a", conf_a), ("b", conf_b)):
            path = write_config(tmp_path / f"{node}.yaml", conf)
            fwd = be.spawn(node, f"fwd-{node}", icn_argv("fwd", "--config", str(path)))
            children.append(fwd)
        for fwd in children[-2:]:
            fwd.wait_for("forwarder ready", timeout=20, stream="stderr")
        env_a = {**os.environ, ENV_VAR: f"unix://{be.unix_socket('a')}"}
        env_b = {**os.environ, ENV_VAR: f"unix://{be.unix_socket('b')}"}

        src = tmp_path / "payload"
        src.write_bytes(PAYLOAD)
        poke_err = tmp_path / "poke.err"
        with open(src, "rb") as stdin, open(poke_err, "wb") as stderr:
            poke = subprocess.Popen(
                be.argv_for("b", icn_argv("poke", "/x/hello", "--timeout", "20s")),
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env_b,
            )
        procs.append(poke)
        wait_until(lambda: "waiting for an Interest" in poke_err.read_text(), poke, poke_err)

        peek = subprocess.run(
            be.argv_for("a", icn_argv("peek", "/x/hello", "--timeout", "10s")),
            capture_output=True,
            timeout=30,
            env=env_a,
        )
        assert peek.returncode == 0, peek.stderr.decode()
        assert peek.stdout == PAYLOAD
        assert poke.wait(10) == 0

        # b answered on its static face toward a: a's forwarder sent from a's link address
        faces = subprocess.run(
            icn_argv("face", "list", "--json"), capture_output=True, timeout=30, env=env_b
        )
        assert faces.returncode == 0, faces.stderr.decode()
        udp = [f for f in json.loads(faces.stdout) if str(f.get("uri", "")).startswith("udp")]
        assert [f["uri"] for f in udp] == [face_a], udp
        assert udp[0]["n_in_interests"] >= 1 and udp[0]["n_out_data"] >= 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)
        stop_all(children)
        be.teardown()
    pids = [c.pid for c in children] + [p.pid for p in procs]
    assert ours(run_id) == []
    assert all(proc_start_time(pid) is None for pid in pids)
    assert not be.sock_dir.exists()
    assert be.record is not None and not be.record.path.exists()
    be.teardown()  # idempotent


def test_teardown_after_a_failed_setup(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    be = NetnsBackend(Scenario.model_validate(TWO_NODES), run_id, tmp_path / "run")
    real = runs.run_command

    def failing(argv: list[str], timeout: float = 10.0) -> str:
        if argv[1:3] == ["link", "add"]:
            raise ConfigError(f"`{' '.join(argv)}` failed: simulated")
        return real(argv, timeout)

    monkeypatch.setattr(netns, "run_command", failing)
    try:
        with pytest.raises(ConfigError, match="simulated"):
            be.setup()
        assert len(ours(run_id)) == 2
        assert be.record is not None and len(RunRecord.load(be.record.path).namespaces) == 2
    finally:
        be.teardown()
    assert ours(run_id) == [] and not be.record.path.exists()
    be.teardown()


def test_setup_refuses_existing_namespaces(run_id: str, tmp_path: Path) -> None:
    ns = f"icn-{run_id}-b"
    runs.run_command(["ip", "netns", "add", ns])
    be = NetnsBackend(Scenario.model_validate(TWO_NODES), run_id, tmp_path / "run")
    try:
        with pytest.raises(ConfigError, match=f"namespaces {ns} already exist"):
            be.setup()
    finally:
        be.teardown()
    assert ours(run_id) == [ns]  # not ours to delete


def test_clean_started_elsewhere_leaves_a_live_run_alone(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean with another state directory and another $TMPDIR (another user's shell, a
    test beside a benchmark) still finds this run's launcher alive: its namespaces and the
    process inside them stay.  Before, the launcher was looked up under the cleaner's $TMPDIR,
    and a live benchmark lost its namespaces and processes."""
    be = NetnsBackend(Scenario.model_validate(TWO_NODES), run_id, tmp_path / "run")
    sleeper: Child | None = None
    try:
        be.setup()
        sleeper = be.spawn("a", "sleep", ["sleep", "60"])
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.setenv(runs.STATE_ENV, str(elsewhere / "state"))
        monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
        assert clean() == []
        assert sleeper.proc.poll() is None and len(ours(run_id)) == 2
    finally:
        if sleeper is not None:
            sleeper.stop(grace=1)
        be.teardown()
    assert ours(run_id) == []
    assert not (runs.owners_dir() / run_id).exists(), "the owner file outlived the run"


def test_clean_after_a_crashed_launcher(run_id: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    be = NetnsBackend(Scenario.model_validate(TWO_NODES), run_id, run_dir)
    sleeper: Child | None = None
    try:
        be.setup()
        assert be.record is not None
        sleeper = be.spawn("a", "sleep", ["sleep", "60"])
        be.record.add_pid(sleeper.pid)
        assert clean() == []  # the launcher (this process) is alive: nothing touched
        assert sleeper.proc.poll() is None and len(ours(run_id)) == 2

        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait(10)
        be.record.launcher_pid = gone.pid  # the launcher died without tearing down
        be.record.save()
        lines = clean()
        assert sleeper.wait(5) == -9
        assert f"killed pid {sleeper.pid} (run {run_id})" in lines
        assert f"deleted namespace icn-{run_id}-a (run {run_id})" in lines
        assert ours(run_id) == [] and not be.record.path.exists()
        assert not be.sock_dir.exists()
    finally:
        if sleeper is not None:
            sleeper.stop(grace=1)
        be.teardown()


def test_clean_removes_unrecorded_namespaces(run_id: str) -> None:
    """A launcher killed before it wrote its record: the namespace is found by its name."""
    ns = f"icn-{run_id}-z"
    runs.run_command(["ip", "netns", "add", ns])
    proc = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "60"])
    try:
        # until ip has entered the namespace (and exec'd sleep)
        wait_until(lambda: proc.pid in runs.namespace_pids(ns), proc)
        assert clean(dry_run=True) == [
            f"would delete namespace {ns} (run {run_id} has no live launcher) "
            "and kill the processes in it"
        ]
        assert proc.poll() is None
        lines = clean()
        assert proc.wait(5) == -9
        assert lines == [
            f"killed pid {proc.pid} in namespace {ns}",
            f"deleted namespace {ns} (run {run_id} has no live launcher)",
        ]
        assert ours(run_id) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
