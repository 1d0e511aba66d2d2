"""Run records: what a scenario run created, written down so ``clean`` can undo a crashed run.

A launcher writes one JSON file per run, ``<state_dir>/<run_id>.json``, and keeps it current as
it creates things: the network namespaces (the netns backend records each one *before* creating
it) and the PIDs of its children (each with its start time from ``/proc/PID/stat``, so a PID
the kernel has since given to another process is never killed).  The file is replaced
atomically on every change and deleted when the run ends normally (:meth:`RunRecord.finish`).

:func:`clean` undoes the runs whose launcher is gone (killed with SIGKILL, machine out of
memory...): it kills their recorded processes, deletes their namespaces and Unix sockets, and
deletes namespaces named ``icn-<run id>-<node>`` that no live run owns.  A run whose launcher is
still alive is never touched, and no process is ever looked up or killed by name.  Namespaces
are the machine's, records are per state directory: a netns run also leaves its launcher's PID
and start time in a machine-wide directory (:func:`owners_dir`, :func:`write_owner`), so a
``clean`` reading another state directory (another user's, a test's) or started with another
``$TMPDIR`` leaves a live run's namespaces alone.

The state directory is ``/run/icn-scenarios`` for root, else ``$XDG_RUNTIME_DIR/icn-scenarios``
or ``/tmp/icn-scenarios-<uid>``; the environment variable ``ICN_SCENARIO_STATE`` overrides it
(tests use it to work in a temporary directory).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from icn.errors import ConfigError

STATE_ENV = "ICN_SCENARIO_STATE"
ROOT_STATE_DIR = Path("/run/icn-scenarios")
# The netns backend names a node's namespace icn-<run id>-<node>, the run id 6 hex digits.
NAMESPACE_RE = re.compile(r"^icn-([0-9a-f]{6})-")
COMMAND_TIMEOUT = 10.0


def state_dir() -> Path:
    """Where run records live: ``$ICN_SCENARIO_STATE`` if set, else ``/run/icn-scenarios`` for
    root, else ``$XDG_RUNTIME_DIR/icn-scenarios`` or ``/tmp/icn-scenarios-<uid>``."""
    override = os.environ.get(STATE_ENV)
    if override:
        return Path(override)
    if os.geteuid() == 0:
        return ROOT_STATE_DIR
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "icn-scenarios"
    return Path(f"/tmp/icn-scenarios-{os.getuid()}")


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time): fields 3 and 22 of ``/proc/PID/stat``, or None if no such PID."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')'
    fields = stat.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[19])  # fields[0] is field 3
    except (IndexError, ValueError):
        return None


def proc_start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat`` (clock ticks after boot), or None if there is no such
    process.  With the PID it names one process for the lifetime of the machine."""
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def same_process(pid: int, start: int | None) -> bool:
    """``pid`` still runs and is the process that had start time ``start``.  A zombie (exited,
    not yet reaped by its parent) does not run."""
    if start is None or pid <= 0:
        return False
    stat = _proc_stat(pid)
    return stat is not None and stat[1] == start and stat[0] not in ("Z", "X")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


# ---- the ip command ----------------------------------------------------------------------------


def run_command(argv: list[str], timeout: float = COMMAND_TIMEOUT) -> str:
    """Run a short command (``ip``, ``tc``) and return its stdout; ConfigError quotes the
    command and its stderr when it fails, is missing or hangs."""
    shown = " ".join(argv)
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise ConfigError(f"`{shown}`: {argv[0]} not found (apt-get install iproute2)") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"`{shown}` did not finish within {timeout:g} s") from None
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or "").strip() or f"exit status {exc.returncode}"
        raise ConfigError(f"`{shown}` failed: {detail}") from None
    return done.stdout


def list_namespaces() -> list[str]:
    """The names in ``ip netns list`` (empty when ``ip`` is missing)."""
    if shutil.which("ip") is None:
        return []
    out = run_command(["ip", "netns", "list"])
    # lines read "NAME" or "NAME (id: N)"
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_exists(name: str) -> bool:
    return name in list_namespaces()


def namespace_pids(name: str) -> list[int]:
    """The PIDs of the processes inside namespace ``name`` (``ip netns pids``)."""
    out = run_command(["ip", "netns", "pids", name])
    return [int(tok) for tok in out.split() if tok.isdigit()]


def kill_pid(pid: int) -> bool:
    """SIGKILL one process by PID; False if it was already gone.  Never the caller itself."""
    if pid <= 1 or pid == os.getpid():
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def remove_namespace(name: str) -> list[int]:
    """Kill every process inside ``name`` by PID, then delete it (which destroys its veths).
    Returns the PIDs killed; a namespace already gone is not an error."""
    if not namespace_exists(name):
        return []
    killed = [pid for pid in namespace_pids(name) if kill_pid(pid)]
    run_command(["ip", "netns", "del", name])
    return killed


def socket_dir(run_id: str) -> Path:
    """Where a run's Unix sockets live; the same path as ``Backend.sock_dir``."""
    return Path(tempfile.gettempdir()) / f"icn-{run_id}"


def owners_dir() -> Path:
    """Where netns launchers write who they are: one file per run id, "PID START" (start time
    as in /proc/PID/stat).  Machine-wide like the namespaces themselves, so neither
    ``$TMPDIR`` nor ``$ICN_SCENARIO_STATE`` hides a live run from a ``clean`` started elsewhere
    (a run whose owner file was not found had its namespaces deleted under it)."""
    if os.geteuid() == 0:
        return Path("/run/icn-owners")
    return Path(f"/tmp/icn-owners-{os.getuid()}")


def write_owner(run_id: str) -> None:
    """Write this process down as ``run_id``'s launcher."""
    path = owners_dir() / run_id
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    path.write_text(f"{os.getpid()} {proc_start_time(os.getpid())}\n")


def owner_alive(run_id: str) -> bool:
    """The launcher written down for ``run_id`` still runs (same PID and start)."""
    try:
        pid, start = (int(v) for v in (owners_dir() / run_id).read_text().split())
    except (OSError, ValueError):  # none, or unreadable: no live owner is known
        return False
    return same_process(pid, start)


def remove_owner(run_id: str) -> None:
    (owners_dir() / run_id).unlink(missing_ok=True)


def remove_socket_dir(path: Path) -> bool:
    """Remove the sockets in ``path``, then ``path`` if that left it empty;
    False if there was nothing to remove.  Anything else is left in place."""
    if not path.is_dir():
        return False
    for entry in path.iterdir():
        if entry.is_socket():
            entry.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: someone else's files
        path.rmdir()
    return not path.exists()


# ---- run records -------------------------------------------------------------------------------


@dataclass
class RecordedPid:
    pid: int
    start: int  # field 22 of /proc/PID/stat when recorded


@dataclass
class RunRecord:
    """One run's record file.  Each mutator rewrites the file atomically (tmp + rename)."""

    run_id: str
    scenario: str
    backend: str
    launcher_pid: int
    launcher_start: int | None
    started: str
    run_dir: str
    namespaces: list[str] = field(default_factory=list)
    pids: list[RecordedPid] = field(default_factory=list)
    finished: bool = False
    path: Path = field(default=Path(), repr=False, compare=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    @classmethod
    def create(cls, run_id: str, scenario_name: str, backend: str, run_dir: Path) -> RunRecord:
        """Write the record of a run starting now, launched by this process."""
        pid = os.getpid()
        directory = state_dir()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        record = cls(
            run_id=run_id,
            scenario=scenario_name,
            backend=backend,
            launcher_pid=pid,
            launcher_start=proc_start_time(pid),
            started=_now(),
            run_dir=str(run_dir),
            path=directory / f"{run_id}.json",
        )
        record.save()
        return record

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        """Read a record file; ValueError (or OSError) if it is not one."""
        data: dict[str, Any] = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not a run record")
        pids = [RecordedPid(int(p["pid"]), int(p["start"])) for p in data.get("pids", [])]
        start = data.get("launcher_start")
        return cls(
            run_id=str(data["run_id"]),
            scenario=str(data.get("scenario", "")),
            backend=str(data.get("backend", "")),
            launcher_pid=int(data["launcher_pid"]),
            launcher_start=None if start is None else int(start),
            started=str(data.get("started", "")),
            run_dir=str(data.get("run_dir", "")),
            namespaces=[str(n) for n in data.get("namespaces", [])],
            pids=pids,
            finished=bool(data.get("finished", False)),
            path=path,
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("path")
        return data

    def save(self) -> None:
        """Write the file atomically: a reader sees the old record or the new one, whole."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)

    @property
    def launcher_alive(self) -> bool:
        """The launcher still runs (same PID and same start time as when it wrote this)."""
        if self.launcher_start is None:  # written where /proc was unreadable: trust the PID
            try:
                os.kill(self.launcher_pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return same_process(self.launcher_pid, self.launcher_start)

    def add_namespace(self, name: str) -> None:
        with self._lock:
            if name not in self.namespaces:
                self.namespaces.append(name)
                self.save()

    def remove_namespace(self, name: str) -> None:
        with self._lock:
            if name in self.namespaces:
                self.namespaces.remove(name)
                self.save()

    def add_pid(self, pid: int) -> None:
        """Record a child by PID and start time (a process already gone is not recorded)."""
        start = proc_start_time(pid)
        if start is None:
            return
        with self._lock:
            self.pids = [p for p in self.pids if p.pid != pid]
            self.pids.append(RecordedPid(pid, start))
            self.save()

    def remove_pid(self, pid: int) -> None:
        """Forget a child that was stopped (optional: ``clean`` checks start times anyway)."""
        with self._lock:
            kept = [p for p in self.pids if p.pid != pid]
            if len(kept) != len(self.pids):
                self.pids = kept
                self.save()

    def finish(self) -> None:
        """The run ended and everything it made is gone: delete the record (idempotent)."""
        with self._lock:
            self.finished = True
            self.path.unlink(missing_ok=True)


# ---- clean -------------------------------------------------------------------------------------


def _try(lines: list[str], what: str, action: Any) -> bool:
    try:
        action()
    except (ConfigError, OSError) as exc:
        lines.append(f"could not {what}: {exc}")
        return False
    return True


def _clean_namespace(name: str, why: str, dry_run: bool, lines: list[str]) -> bool:
    if dry_run:
        lines.append(f"would delete namespace {name} ({why}) and kill the processes in it")
        return True
    killed: list[int] = []

    def act() -> None:
        killed.extend(remove_namespace(name))

    if not _try(lines, f"delete namespace {name}", act):
        return False
    for pid in killed:
        lines.append(f"killed pid {pid} in namespace {name}")
    lines.append(f"deleted namespace {name} ({why})")
    return True


def _clean_record(record: RunRecord, existing: set[str], dry_run: bool, lines: list[str]) -> None:
    run = f"run {record.run_id}"
    ok = True
    for entry in record.pids:
        if not same_process(entry.pid, entry.start):
            continue
        if dry_run:
            lines.append(f"would kill pid {entry.pid} ({run})")
        elif kill_pid(entry.pid):
            lines.append(f"killed pid {entry.pid} ({run})")
    for name in record.namespaces:
        if name in existing:
            ok = _clean_namespace(name, run, dry_run, lines) and ok
    _clean_socket_dir(record.run_id, run, dry_run, lines)
    if dry_run:
        lines.append(f"would delete run record {record.path}")
    elif ok:  # keep the record while a namespace of it remains, so a later clean retries
        remove_owner(record.run_id)
        record.path.unlink(missing_ok=True)
        lines.append(f"deleted run record {record.path} ({record.scenario}, {record.started})")


def _clean_socket_dir(run_id: str, run: str, dry_run: bool, lines: list[str]) -> None:
    sock_dir = socket_dir(run_id)
    if not sock_dir.is_dir():
        return
    if dry_run:
        lines.append(f"would remove {sock_dir} ({run})")
    elif remove_socket_dir(sock_dir):
        lines.append(f"removed {sock_dir} ({run})")
    else:
        lines.append(f"left {sock_dir} ({run}): it holds files other than sockets")


def clean(dry_run: bool = False) -> list[str]:
    """Undo every run whose launcher is gone; returns what was (or would be) removed.

    For each record of a dead launcher: SIGKILL its recorded processes that are still the same
    process (PID and start time), delete its namespaces, remove its Unix sockets (the run's
    :func:`socket_dir`) and the record.  Then delete every
    ``icn-<run id>-*`` namespace whose run has no live record (a launcher killed before it wrote
    the record), killing the processes inside by PID first, and that run's socket directory.
    Runs whose launcher is alive are left alone.
    """
    lines: list[str] = []
    # Namespaces first, records second: a launcher writes its record before it creates a
    # namespace, so every namespace listed here has its record visible in the scan below.
    namespaces: list[str] = []
    _try(lines, "list namespaces", lambda: namespaces.extend(list_namespaces()))
    existing = set(namespaces)
    protected: set[str] = set()  # run ids with a live (or unreadable) record
    handled: set[str] = set()
    orphans: set[str] = set()  # run ids of namespaces without a record
    directory = state_dir()
    paths = sorted(directory.glob("*.json")) if directory.is_dir() else []
    for path in paths:
        try:
            record = RunRecord.load(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            protected.add(path.stem)
            lines.append(f"skipped unreadable run record {path}: {exc}")
            continue
        if record.launcher_alive and not record.finished:
            protected.add(record.run_id)
            continue
        _clean_record(record, existing, dry_run, lines)
        handled.update(record.namespaces)
    for name in namespaces:
        m = NAMESPACE_RE.match(name)
        if m is None or m.group(1) in protected or name in handled:
            continue
        run_id = m.group(1)
        if owner_alive(run_id):  # a live run whose record is in another state directory: left
            continue  # alone and unsaid, as live runs recorded here are
        _clean_namespace(name, f"run {run_id} has no live launcher", dry_run, lines)
        orphans.add(run_id)
    for run_id in sorted(orphans):
        _clean_socket_dir(run_id, f"run {run_id}", dry_run, lines)
        if not dry_run:
            remove_owner(run_id)  # a dead launcher's
    if not dry_run and owners_dir().is_dir():
        for owner in owners_dir().iterdir():  # launchers gone since, whatever they left
            if not owner_alive(owner.name):
                owner.unlink(missing_ok=True)
    if not dry_run and directory.is_dir():
        for tmp in directory.glob(".*.tmp"):  # a launcher killed in the middle of a save
            with contextlib.suppress(OSError, ValueError):
                pid = int(tmp.name.rsplit(".", 2)[-2])
                if proc_start_time(pid) is None:
                    tmp.unlink()
    return lines
