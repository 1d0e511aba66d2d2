"""A scenario node's agent on its Ray node: it starts the node's processes there and answers the
launcher's calls about them (:mod:`apps.scenario.ray_backend` makes it a Ray actor; nothing
here imports Ray, so it is tested as a plain object too).

The agent keeps a directory of its own on its machine: ``<tmp>/icn-ray-<run id>-<node>-XXXX``
(``<tmp>`` is the Ray worker's temporary directory, ``$TMPDIR`` or ``/tmp``) with the file
``agent`` (its PID and start time), the forwarder's Unix socket (``fwd.sock``: short, as a
socket path may not exceed 107 bytes) and ``run/``, which mirrors the launcher's output
folder.  The launcher ships the input files a process needs (its forwarder config or spec,
under ``config/`` and ``procs/``) with each start, pulls back what the processes write under
``logs/`` and ``results/`` as it grows (:meth:`NodeAgent.sync`), and anything else they wrote
at the end (:meth:`NodeAgent.collect`).

Every child is started with PR_SET_PDEATHSIG by one thread that lives as long as the agent (the
signal follows the thread that started the child, not the process), so when the agent dies,
killed by Ray when the launcher goes or by the launcher's teardown, its children die with it.
An agent killed that way leaves its directory behind: the next agent on that machine removes
the directories of agents that no longer run (:func:`sweep`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

from apps.scenario.parent_death import die_with_parent
from apps.scenario.ray_relay import RelayLoop
from apps.scenario.runs import proc_start_time, same_process
from icn.errors import ConfigError

PYTHON = "{python}"  # argv[0] that stands for the agent's own interpreter
MIRRORED = ("logs", "results")  # appended as processes run, pulled back while they do
INPUTS = ("config", "procs")  # shipped by the launcher, never pulled back
SYNC_CHUNK = 4 << 20  # bytes of one file per sync call
SYNC_POLL = 0.05  # how often a waiting sync looks at its files and processes
RESULTS_EVERY = 1.0  # new bytes only in results end a waiting sync after this long
SPAWN_TIMEOUT = 30.0
PORT_TRIES = 1000
PREFIX = "icn-ray-"
OWNER_FILE = "agent"


def hold_port(host: str, port: int) -> socket.socket | None:
    """A hold on ``port`` of ``host`` among the agents of this machine: a Unix socket bound to
    an abstract name for it (None if another process holds it), which the kernel releases
    however its process ends, and which leaves no file behind."""
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        held.bind(f"\0{PREFIX}port-{host}-{port}")
    except OSError:
        held.close()
        return None
    return held


def sweep(tmp: Path) -> list[Path]:
    """Remove the directories under ``tmp`` of agents that no longer run (their PID and start
    time no longer name a live process); returns them.  A directory without a readable owner
    file is not an agent's, or is one still being made: left alone."""
    removed: list[Path] = []
    for path in tmp.glob(f"{PREFIX}*"):
        try:
            pid, start = (int(v) for v in (path / OWNER_FILE).read_text().split())
        except (OSError, ValueError):
            continue
        if not same_process(pid, start):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class NodeAgent:
    """One scenario node's processes on one Ray node.  ``host`` is the Ray node's address;
    ``secret`` the run's relay secret (:mod:`apps.scenario.ray_relay`)."""

    def __init__(self, run_id: str, node: str, host: str, secret: bytes) -> None:
        self.node = node
        self.host = host
        sweep(Path(tempfile.gettempdir()))
        self.base = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{run_id}-{node}-"))
        (self.base / OWNER_FILE).write_text(f"{os.getpid()} {proc_start_time(os.getpid())}\n")
        self.run_dir = self.base / "run"
        for sub in MIRRORED:
            (self.run_dir / sub).mkdir(parents=True)
        self.socket = self.base / "fwd.sock"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()  # shut down: a waiting sync answers at once
        self._held: list[socket.socket] = []  # hold_port's, for the ports it picked
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix=f"spawn-{node}")
        self._relay = RelayLoop(f"relay-{node}")
        self.relay_port = self._relay.run(self._relay.serve_node(host, secret, self.socket))

    def info(self) -> dict[str, Any]:
        """Where things are on this machine, for the launcher."""
        return {
            "run_dir": str(self.run_dir),
            "socket": str(self.socket),
            "relay_port": self.relay_port,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
        }

    def pick_port(self, first: int) -> int:
        """The first port from ``first`` up that is free on ``host`` for both UDP and TCP and
        that no other agent on this machine holds.  The agent holds the port it picks for as
        long as it lives (:func:`hold_port`): the scenario's other nodes on this Ray node, and
        other runs on the same cluster, never pick it, even while a fault has the forwarder
        down."""
        for port in range(first, first + PORT_TRIES):
            held = hold_port(self.host, port)
            if held is None:
                continue
            try:
                for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                    with socket.socket(socket.AF_INET, kind) as s:
                        s.bind((self.host, port))
            except OSError:
                held.close()
                continue
            self._held.append(held)
            return port
        raise ConfigError(
            f"node {self.node}: no port free for UDP and TCP on {self.host} between {first} "
            f"and {first + PORT_TRIES - 1}"
        )

    # ---- processes -------------------------------------------------------------------------

    def _inside(self, rel: str) -> Path:
        """``rel`` under the run directory; ValueError if it would leave it."""
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
            raise ValueError(f"{rel!r} is not a path inside the run directory")
        return self.run_dir.joinpath(*parts)

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str], files: dict[str, bytes]
    ) -> int:
        """Write ``files`` (relative to the run directory), then start ``argv`` with its output
        in ``logs/<name>.out|.err``; returns its PID."""
        for rel, data in files.items():
            path = self._inside(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        argv = [sys.executable if i == 0 and a == PYTHON else a for i, a in enumerate(argv)]
        with self._lock:
            old = self._procs.get(name)
            if old is not None and old.poll() is None:
                raise ValueError(f"node {self.node}: {name} is already running (pid {old.pid})")
            logs = self.run_dir / "logs"
            proc = self._spawner.submit(self._popen, argv, env, logs, name).result(SPAWN_TIMEOUT)
            self._procs[name] = proc
        return proc.pid

    def _popen(
        self, argv: list[str], env: dict[str, str], logs: Path, name: str
    ) -> subprocess.Popen[bytes]:
        with (
            open(logs / f"{name}.out", "wb") as out,
            open(logs / f"{name}.err", "wb") as err,
            open(os.devnull, "rb") as inp,
        ):
            return subprocess.Popen(
                argv,
                stdin=inp,
                stdout=out,
                stderr=err,
                cwd=self.run_dir,
                env={**os.environ, **env},
                preexec_fn=die_with_parent,
            )

    def _proc(self, name: str) -> subprocess.Popen[bytes]:
        with self._lock:
            proc = self._procs.get(name)
        if proc is None:
            raise KeyError(f"node {self.node}: no process named {name}")
        return proc

    def signal(self, name: str, sig: int) -> bool:
        """Send ``sig`` to ``name``; False if it has already ended."""
        proc = self._proc(name)
        if proc.poll() is not None:
            return False
        proc.send_signal(sig)
        return True

    def wait(self, name: str, timeout: float) -> int | None:
        """``name``'s exit code once it ends, or None if it still runs after ``timeout``."""
        try:
            return self._proc(name).wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    # ---- files -----------------------------------------------------------------------------

    def sync(
        self, offsets: dict[str, int], running: list[str] | None = None, wait: float = 0.0
    ) -> dict[str, Any]:
        """What is new since the launcher's ``offsets`` (run-relative path -> bytes it holds) in
        the files under ``logs/`` and ``results/``, and each process's exit code (None while it
        runs).  The codes are read first, so the output of a process seen ended is all there.

        With nothing new, it looks again every :data:`SYNC_POLL` for up to ``wait`` seconds (so
        the launcher asks only when there is something to pull): bytes in a log or the end of a
        process in ``running`` (those it has not seen end) answer at once; bytes only in results
        wait :data:`RESULTS_EVERY` (the launcher reads them at the end and for its live counts,
        and workloads append to them all the time)."""
        running = running or []
        start = time.monotonic()
        while True:
            with self._lock:
                procs = list(self._procs.items())
            exits = {name: proc.poll() for name, proc in procs}
            grown = self._grown(offsets)
            waited = time.monotonic() - start
            if (
                waited >= wait
                or any(exits.get(name) is not None for name in running)
                or any(rel.startswith("logs/") for rel in grown)
                or (grown and waited >= RESULTS_EVERY)
                or self._closed.wait(SYNC_POLL)
            ):
                break
        files: dict[str, tuple[int, bytes]] = {}
        for rel in grown:
            start_at = offsets.get(rel, 0)
            with contextlib.suppress(OSError), open(self.run_dir / rel, "rb") as f:
                f.seek(start_at)
                files[rel] = (start_at, f.read(SYNC_CHUNK))
        return {"exits": exits, "files": files}

    def _grown(self, offsets: dict[str, int]) -> list[str]:
        """The mirrored files (run-relative) that hold more bytes than ``offsets`` says."""
        grown = []
        for sub in MIRRORED:
            for path in sorted((self.run_dir / sub).rglob("*")):
                rel = path.relative_to(self.run_dir).as_posix()
                with contextlib.suppress(OSError):
                    if path.is_file() and path.stat().st_size > offsets.get(rel, 0):
                        grown.append(rel)
        return grown

    def collect(self, max_bytes: int) -> dict[str, Any]:
        """The other files the processes wrote in the run directory (a stream sink's output, a
        checkpoint...), whole, up to ``max_bytes`` in all; ``skipped`` lists the rest."""
        files: dict[str, bytes] = {}
        skipped: list[str] = []
        total = 0
        for path in sorted(self.run_dir.rglob("*")):
            rel = path.relative_to(self.run_dir)
            if rel.parts[0] in (*MIRRORED, *INPUTS) or not path.is_file():
                continue
            try:
                size = path.stat().st_size
                if total + size > max_bytes:
                    skipped.append(rel.as_posix())
                    continue
                files[rel.as_posix()] = path.read_bytes()
                total += size
            except OSError:
                skipped.append(rel.as_posix())
        return {"files": files, "skipped": skipped}

    # ---- the end ---------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Kill what still runs (by PID), stop the relay, remove the agent's directory."""
        self._closed.set()
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5.0)
        self._relay.close()
        for held in self._held:
            held.close()
        self._spawner.shutdown(wait=False)
        shutil.rmtree(self.base, ignore_errors=True)
