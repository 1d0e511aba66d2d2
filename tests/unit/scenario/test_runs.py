"""Run records and ``clean`` without namespaces: records, PID start times, what gets killed.

Each test has its own state directory (``ICN_SCENARIO_STATE``) and sees no namespaces, so a
scenario running on this machine at the same time is never touched.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.scenario import runs
from apps.scenario.backend import LocalBackend
from apps.scenario.runs import RunRecord, clean, proc_start_time, same_process, state_dir
from apps.scenario.schema import Scenario


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state"
    monkeypatch.setenv(runs.STATE_ENV, str(path))
    monkeypatch.setattr(runs, "list_namespaces", lambda: [])
    monkeypatch.setattr(runs, "socket_dir", lambda run_id: tmp_path / f"icn-{run_id}")
    monkeypatch.setattr(runs, "owners_dir", lambda: tmp_path / "owners")
    return path


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)


def make_socket(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))


def dead_pid() -> int:
    """The PID of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(10)
    return proc.pid


def mark_launcher_dead(record: RunRecord) -> None:
    record.launcher_pid = dead_pid()
    record.save()


def test_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(runs.STATE_ENV, str(tmp_path))
    assert state_dir() == tmp_path
    monkeypatch.delenv(runs.STATE_ENV)
    if os.geteuid() == 0:
        assert state_dir() == Path("/run/icn-scenarios")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert state_dir() == Path("/run/user/1000/icn-scenarios")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert state_dir() == Path(f"/tmp/icn-scenarios-{os.getuid()}")


def test_proc_start_time() -> None:
    start = proc_start_time(os.getpid())
    assert start is not None and start > 0
    assert same_process(os.getpid(), start)
    assert not same_process(os.getpid(), start + 1)
    assert proc_start_time(dead_pid()) is None


def test_record_write_read_finish(state: Path, tmp_path: Path) -> None:
    record = RunRecord.create("abc123", "demo", "netns", tmp_path / "run")
    path = state / "abc123.json"
    assert record.path == path and path.is_file()
    record.add_namespace("icn-abc123-a")
    record.add_namespace("icn-abc123-a")  # once only
    record.add_pid(os.getpid())
    data = json.loads(path.read_text())
    assert data["run_id"] == "abc123" and data["scenario"] == "demo"
    assert data["backend"] == "netns" and data["launcher_pid"] == os.getpid()
    assert data["run_dir"] == str(tmp_path / "run") and data["finished"] is False
    assert data["namespaces"] == ["icn-abc123-a"]
    assert data["pids"] == [{"pid": os.getpid(), "start": proc_start_time(os.getpid())}]
    assert "T" in data["started"]
    loaded = RunRecord.load(path)
    assert loaded == record and loaded.launcher_alive
    record.remove_pid(os.getpid())
    record.remove_namespace("icn-abc123-a")
    assert RunRecord.load(path).pids == [] and RunRecord.load(path).namespaces == []
    assert not list(state.glob(".*.tmp"))  # every save renamed its temporary file
    record.finish()
    assert not path.exists()
    record.finish()  # idempotent


def test_add_pid_of_a_gone_process_is_ignored(state: Path, tmp_path: Path) -> None:
    record = RunRecord.create("abc124", "demo", "local", tmp_path)
    record.add_pid(dead_pid())
    assert RunRecord.load(record.path).pids == []


def test_clean_kills_a_dead_runs_process(
    state: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    run_dir = tmp_path / "run"
    sock_dir = runs.socket_dir("dead01")
    make_socket(sock_dir / "a.sock")
    record = RunRecord.create("dead01", "demo", "local", run_dir)
    record.add_pid(sleeper.pid)
    mark_launcher_dead(record)
    assert clean(dry_run=True) == [
        f"would kill pid {sleeper.pid} (run dead01)",
        f"would remove {sock_dir} (run dead01)",
        f"would delete run record {record.path}",
    ]
    assert sleeper.poll() is None and record.path.exists()
    lines = clean()
    assert sleeper.wait(5) == -9
    assert lines[:2] == [
        f"killed pid {sleeper.pid} (run dead01)",
        f"removed {sock_dir} (run dead01)",
    ]
    assert lines[2].startswith(f"deleted run record {record.path}")
    assert not record.path.exists() and not sock_dir.exists()
    assert clean() == []


def test_clean_leaves_files_that_are_not_sockets(state: Path) -> None:
    sock_dir = runs.socket_dir("dead04")
    make_socket(sock_dir / "a.sock")
    (sock_dir / "notes.txt").write_text("mine")
    record = RunRecord.create("dead04", "demo", "local", Path())
    mark_launcher_dead(record)
    assert f"left {sock_dir} (run dead04): it holds files other than sockets" in clean()
    assert sorted(p.name for p in sock_dir.iterdir()) == ["notes.txt"]


def test_socket_dir_is_the_backends(tmp_path: Path) -> None:
    sc = Scenario.model_validate({"name": "t", "nodes": {"a": {}}})
    assert runs.socket_dir("abc123") == LocalBackend(sc, "abc123", tmp_path).sock_dir


def test_clean_treats_a_reused_launcher_pid_as_dead(
    state: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    record = RunRecord.create("dead02", "demo", "local", tmp_path)
    record.add_pid(sleeper.pid)
    assert record.launcher_start is not None
    record.launcher_start -= 1  # the PID is alive, but it is not the launcher any more
    record.save()
    clean()
    assert sleeper.wait(5) == -9


def test_clean_leaves_a_live_run_alone(
    state: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    record = RunRecord.create("live01", "demo", "local", tmp_path)  # launched by this process
    record.add_pid(sleeper.pid)
    make_socket(runs.socket_dir("live01") / "a.sock")
    assert clean() == []
    assert sleeper.poll() is None and record.path.exists()
    assert (runs.socket_dir("live01") / "a.sock").is_socket()


def test_clean_does_not_kill_a_reused_pid(
    state: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    record = RunRecord.create("dead03", "demo", "local", tmp_path)
    start = proc_start_time(sleeper.pid)
    assert start is not None
    # as if the recorded process had exited and the kernel had given its PID to `sleeper`
    record.pids = [runs.RecordedPid(sleeper.pid, start - 1)]
    mark_launcher_dead(record)
    lines = clean()
    assert sleeper.poll() is None
    assert not any(line.startswith("killed") for line in lines)
    assert not record.path.exists()


def test_clean_skips_an_unreadable_record(state: Path) -> None:
    state.mkdir(parents=True)
    (state / "bad001.json").write_text("{not json")
    lines = clean()
    assert len(lines) == 1 and lines[0].startswith("skipped unreadable run record")
    assert (state / "bad001.json").exists()


def test_clean_without_state_dir(state: Path) -> None:
    assert not state.exists()
    assert clean() == []


def test_a_zombie_launcher_is_dead(state: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """A launcher killed outright can stay a zombie until its parent reaps it."""
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    start = proc_start_time(zombie.pid)
    try:
        assert start is not None
        deadline = time.monotonic() + 10
        while Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert proc_start_time(zombie.pid) == start and not same_process(zombie.pid, start)
        record = RunRecord.create("zomb01", "demo", "local", Path())
        record.add_pid(sleeper.pid)
        record.launcher_pid, record.launcher_start = zombie.pid, start
        record.save()
        clean()
        assert sleeper.wait(5) == -9
    finally:
        zombie.wait(5)


def test_clean_leaves_a_live_runs_namespaces_whose_record_is_elsewhere(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Namespaces are the machine's, records a state directory's: a clean reading this state
    directory must not take another live run (its launcher is this process) for a crashed one."""
    monkeypatch.setattr(runs, "list_namespaces", lambda: ["icn-0a1b2c-a", "icn-0a1b2c-b"])
    removed: list[str] = []
    monkeypatch.setattr(runs, "remove_namespace", lambda name: removed.append(name) or [])
    runs.write_owner("0a1b2c")
    assert clean() == []  # left alone, as a live run recorded here would be
    assert removed == []
    # the owner gone (a PID that no longer runs): now they are a crashed run's, and removed
    owner = runs.owners_dir() / "0a1b2c"
    owner.write_text(f"{dead_pid()} 1\n")
    lines = clean()
    assert removed == ["icn-0a1b2c-a", "icn-0a1b2c-b"]
    assert "deleted namespace icn-0a1b2c-a (run 0a1b2c has no live launcher)" in lines
    assert not owner.exists()  # a dead launcher's, removed with its namespaces


def test_clean_removes_the_owner_files_of_dead_launchers_only(state: Path) -> None:
    runs.write_owner("0a1b2c")  # this process: alive
    gone = runs.owners_dir() / "0d0d0d"
    gone.write_text(f"{dead_pid()} 1\n")
    assert clean() == []
    assert (runs.owners_dir() / "0a1b2c").exists() and not gone.exists()
