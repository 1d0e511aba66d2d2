"""Processes on another machine, seen by the launcher as its own children.

The runner, the sampler and the faults use a :class:`~apps.procs.Child`: its ``pid``, its
``proc`` (poll, returncode, send_signal, kill, wait), its ``stop``, and its output read from
``stdout_path``/``stderr_path`` (a forwarder's counters line after SIGUSR1, a service's ready
line).  A :class:`RemoteChild` is such a child for a process that a node agent
(:mod:`apps.scenario.ray_agent`) runs on a Ray node: signals and waits are calls to the agent,
and an :class:`AgentMirror` thread per agent pulls the agent's new log and results bytes into
the launcher's output folder, with the exit codes of its processes, so ``poll()`` answers at
once from what the last pull saw and the log files are the ones the launcher reads as on
``local``.  A pull waits on the agent until there is something new (up to :data:`SYNC_WAIT`):
an idle node costs a call every few seconds, a busy one at most one per :data:`SYNC_GAP`, and
a line a forwarder logs reaches the launcher within about 0.1 s either way.

Nothing here imports Ray: an agent is reached through an :class:`AgentCalls` (Ray's in
:mod:`apps.scenario.ray_backend`, a direct one in the tests).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from apps.procs import Child
from icn.errors import IcnError

log = logging.getLogger(__name__)

SYNC_WAIT = 2.0  # the longest a pull waits on the agent for something new
SYNC_GAP = 0.1  # the least time between the starts of two pulls
CALL_TIMEOUT = 10.0
WAIT_STEP = 5.0  # one agent call of a longer wait
GONE_CODE = -signal.SIGKILL  # the exit code of a process whose agent is gone


class AgentGone(IcnError):
    """The node agent no longer answers (its process or its Ray node died)."""


class AgentCalls(Protocol):
    """Call ``method`` of one agent with ``args`` and return its result; TimeoutError after
    ``timeout`` seconds, :class:`AgentGone` once the agent is dead."""

    def __call__(self, method: str, *args: Any, timeout: float) -> Any: ...


class RemoteProc:
    """A process run by an agent, answering as a ``subprocess.Popen`` does."""

    def __init__(self, mirror: AgentMirror, name: str, pid: int, argv: list[str]) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.name = name
        self.argv = argv
        self._mirror = mirror

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Sent without waiting for the agent's answer, as a local signal is: the runner sends
        them from its event loop (SIGUSR1 to every forwarder at each sample, a fault's kill)."""
        if self.returncode is None:
            self._mirror.post("signal", self.name, int(sig))

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> int:
        """The exit code once the process has ended (its last output pulled first);
        ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = WAIT_STEP if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.argv, timeout or 0.0)
            step = min(left, WAIT_STEP)
            try:
                code = self._mirror.call("wait", self.name, step, timeout=step + CALL_TIMEOUT)
            except AgentGone:
                break
            if code is not None:
                with contextlib.suppress(AgentGone, TimeoutError):
                    self._mirror.sync()
                if self.returncode is None:
                    self.returncode = int(code)
        return GONE_CODE if self.returncode is None else self.returncode


class RemoteChild(Child):
    """A :class:`Child` whose process runs on another machine (nothing is started here: its
    :class:`AgentMirror` made it).  Its logs are the mirrored files in the output folder."""

    def __init__(self, name: str, argv: list[str], workdir: Path, proc: RemoteProc) -> None:
        self.name = name
        self.argv = argv
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
        self.proc = proc


class AgentMirror:
    """One agent's processes and files, from the launcher: ``out_dir`` receives what its
    processes write under ``logs/`` and ``results/`` (paths relative to the run folder on both
    sides), pulled by a thread of its own as it appears."""

    def __init__(self, node: str, calls: AgentCalls, out_dir: Path) -> None:
        self.node = node
        self.calls = calls
        self.out_dir = out_dir
        self.procs: dict[str, RemoteProc] = {}
        self.offsets: dict[str, int] = {}
        self.gone: str | None = None
        self._lock = threading.Lock()  # guards procs and offsets, held only between calls
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # posted calls: in order, each after the one before has been answered
        self._poster = ThreadPoolExecutor(1, thread_name_prefix=f"post-{node}")

    def call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT) -> Any:
        if self.gone is not None:
            raise AgentGone(self.gone)
        try:
            return self.calls(method, *args, timeout=timeout)
        except AgentGone as exc:
            self._mark_gone(str(exc))
            raise

    def post(self, method: str, *args: Any) -> None:
        """Call ``method`` without waiting for its answer; a failure is logged (an agent gone
        is the pulls' to notice)."""
        if self.gone is None:
            self._poster.submit(self.call, method, *args).add_done_callback(self._posted)

    def _posted(self, done: Future[Any]) -> None:
        exc = done.exception()
        if exc is not None and not isinstance(exc, AgentGone):
            log.warning("node %s: %s", self.node, exc)

    def _mark_gone(self, why: str) -> None:
        if self.gone is None:
            log.warning("node %s: its agent is gone: %s", self.node, why)
        self.gone = why
        for proc in list(self.procs.values()):
            if proc.returncode is None:
                proc.returncode = GONE_CODE

    def spawn(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        files: dict[str, bytes],
        shown_argv: list[str],
    ) -> RemoteChild:
        """Start ``argv`` on the agent (after writing ``files`` there) as ``name``; its logs
        appear as ``out_dir/logs/<name>.out|.err``.  ``shown_argv``: the command line as the
        launcher gave it, for messages."""
        logs = self.out_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with self._lock:
            for ext in ("out", "err"):  # fresh files, as a local child's, before any pull
                (logs / f"{name}.{ext}").write_bytes(b"")
                self.offsets[f"logs/{name}.{ext}"] = 0
            pid = int(self.call("spawn", name, argv, env, files))
            proc = RemoteProc(self, name, pid, shown_argv)
            self.procs[name] = proc
        return RemoteChild(name, shown_argv, logs, proc)

    def sync(self, wait: float = 0.0) -> None:
        """Pull what is new: bytes appended to the mirrored files, exit codes; ``wait``: how
        long the agent may wait for something new.  Pulls may overlap (the thread's, a wait's
        last one): of each piece of a file, only what this side's copy lacks is written."""
        with self._lock:
            offsets = dict(self.offsets)
            running = [name for name, proc in self.procs.items() if proc.returncode is None]
        got = self.call("sync", offsets, running, wait, timeout=wait + CALL_TIMEOUT)
        with self._lock:
            for rel, (start, data) in got["files"].items():
                have = self.offsets.get(rel, 0)
                if not start <= have < start + len(data):
                    continue  # another pull wrote it first (or spawn made the file anew)
                path = self.out_dir / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "ab") as f:
                    f.write(data[have - start :])
                self.offsets[rel] = start + len(data)
            for name, code in got["exits"].items():
                proc = self.procs.get(name)
                if proc is not None and code is not None and proc.returncode is None:
                    proc.returncode = int(code)

    def collect(self, max_bytes: int) -> list[str]:
        """Copy the other files the processes wrote (whole); returns those left out."""
        got = self.call("collect", max_bytes, timeout=60.0)
        for rel, data in got["files"].items():
            path = self.out_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return [str(s) for s in got["skipped"]]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"mirror-{self.node}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.gone is None:
            began = time.monotonic()
            try:
                self.sync(SYNC_WAIT)
            except (AgentGone, TimeoutError):
                pass
            except Exception:  # a bug here must not end the mirroring silently
                log.exception("node %s: pulling its logs failed", self.node)
            self._stop.wait(max(0.0, SYNC_GAP - (time.monotonic() - began)))

    def stop(self) -> None:
        """No pull after the one under way (the agent's shutdown ends its wait)."""
        self._stop.set()

    def join(self, timeout: float = CALL_TIMEOUT) -> None:
        self._poster.shutdown(wait=False, cancel_futures=True)
        if self._thread is not None:
            self._thread.join(timeout)
