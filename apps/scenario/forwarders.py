"""A node's forwarder as the launcher drives it: alone in its process, or packed with others.

The runner asks the same of both: is it ready yet, is it running, kill it, its counters, and
the output its co-located services printed since it started.  :class:`SoloForwarder` is a
process of its own (``icn fwd``, or :mod:`apps.scenario.colocated`): ready when its log says
so, killed with SIGKILL, counted through SIGUSR1.  :class:`PackedForwarder` is one node of a
:class:`ForwarderHost`, a process running :mod:`apps.scenario.packed`: ready when the host's
stdout says so, killed and counted through the host's control socket, so a kill takes that
node's forwarder and services and nothing else of the process.

:func:`await_ready` waits for many at once, one poll over all of them (no thread or task per
node), and fails naming how many were ready and which were not.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from apps.procs import Child
from apps.scenario import metrics
from apps.scenario.packed import FAILED_MARK, READY_MARK
from apps.scenario.packing import not_ready_text
from icn.errors import IcnError

FWD_READY = "forwarder ready"
POLL_EVERY = 0.1
CONTROL_TIMEOUT = 10.0  # a host busy forwarding for its other nodes answers within this
KILL_WAIT = 5.0


class NotReady(IcnError):
    """Forwarders that did not get ready: ``ready`` and ``not_ready`` name the nodes."""

    def __init__(self, text: str, ready: list[str], not_ready: list[str]) -> None:
        super().__init__(text)
        self.ready = ready
        self.not_ready = not_ready


class ControlError(IcnError):
    """A packed host refused a request or did not answer it."""


class _Tail:
    """New bytes of a growing log file, read from where the last read stopped."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self._partial = b""

    def lines(self) -> list[str]:
        """The complete lines written since the last call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        self.offset += len(chunk)
        *done, self._partial = (self._partial + chunk).split(b"\n")
        return [line.decode(errors="replace") for line in done]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class NodeForwarder(ABC):
    """One start of one node's forwarder (a restart is a new one)."""

    node: str
    name: str  # fwd-<node>, fwd-<node>.1 after a restart...: unique in a run

    @property
    @abstractmethod
    def pid(self) -> int:
        """The process it runs in."""

    @abstractmethod
    def poll_ready(self) -> bool:
        """True once it serves; RuntimeError (why) if it never will."""

    @abstractmethod
    def running(self) -> bool: ...

    @abstractmethod
    def exit_code(self) -> int | None:
        """The code its process exited with; None while that runs."""

    @abstractmethod
    def output(self) -> str:
        """Its process's stdout since this start (co-located services' lines)."""

    @abstractmethod
    def errors(self) -> str:
        """Its process's stderr."""

    @abstractmethod
    async def kill(self) -> None:
        """Its machine dies: the forwarder and its co-located services, at once."""

    @abstractmethod
    async def counters(self) -> dict[str, int]:
        """Every counter (gauges left out); empty if it does not answer in time."""


class SoloForwarder(NodeForwarder):
    """A node in a process of its own."""

    def __init__(self, node: str, child: Child) -> None:
        self.node = node
        self.name = child.name
        self.child = child
        self._log = _Tail(child.stderr_path)
        self._ready = False

    @property
    def pid(self) -> int:
        return self.child.pid

    def poll_ready(self) -> bool:
        if not self._ready:
            self._ready = any(FWD_READY in line for line in self._log.lines())
        if not self._ready and self.child.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.child.proc.returncode} before "
                f"{FWD_READY!r}:\n{self.child.errors()[-3000:]}"
            )
        return self._ready

    def running(self) -> bool:
        return self.child.proc.poll() is None

    def exit_code(self) -> int | None:
        return self.child.proc.poll()

    def output(self) -> str:
        return self.child.output()

    def errors(self) -> str:
        return self.child.errors()

    async def kill(self) -> None:
        if self.child.proc.poll() is None:
            self.child.proc.kill()
            await asyncio.to_thread(self.child.proc.wait, KILL_WAIT)

    async def counters(self) -> dict[str, int]:
        return await metrics.forwarder_counters(self.child)


class ForwarderHost:
    """A process hosting several nodes (:mod:`apps.scenario.packed`), as the runner holds it:
    its child process, its control socket, and the ready and failed lines its stdout had."""

    def __init__(self, child: Child, control: Path) -> None:
        self.child = child
        self.control = control
        self._out = _Tail(child.stdout_path)
        self.ready_count: Counter[str] = Counter()
        self.failures: dict[str, list[str]] = {}

    @property
    def name(self) -> str:
        return self.child.name

    def running(self) -> bool:
        return self.child.proc.poll() is None

    def refresh(self) -> None:
        for line in self._out.lines():
            if line.startswith(READY_MARK + " "):
                self.ready_count[line[len(READY_MARK) + 1 :].strip()] += 1
            elif line.startswith(FAILED_MARK + " "):
                node, _, why = line[len(FAILED_MARK) + 1 :].partition(": ")
                self.failures.setdefault(node, []).append(why)

    def output_size(self) -> int:
        return _size(self.child.stdout_path)

    async def request(self, op: str, node: str, timeout: float = CONTROL_TIMEOUT) -> dict[str, Any]:
        """Send one control request; its answer, or ControlError."""
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(str(self.control))
                try:
                    writer.write(json.dumps({"op": op, "node": node}).encode() + b"\n")
                    await writer.drain()
                    line = await reader.readline()
                finally:
                    writer.close()
        except TimeoutError:
            raise ControlError(
                f"{self.name}: no answer to {op} {node} within {timeout:g} s"
            ) from None
        except OSError as exc:
            raise ControlError(f"{self.name}: {op} {node}: {exc}") from None
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise ControlError(f"{self.name}: {op} {node}: no answer (did it exit?)")
        if not reply.get("ok"):
            raise ControlError(f"{self.name}: {op} {node}: {reply.get('error')}")
        return reply


class PackedForwarder(NodeForwarder):
    """A node in a :class:`ForwarderHost`.  Made when the host is started with the node, or by
    :meth:`restart` in a running host."""

    def __init__(self, node: str, name: str, host: ForwarderHost) -> None:
        self.node = node
        self.name = name
        self.host = host
        host.refresh()
        # this start is the next ready line for the node, and its output begins here
        self._generation = host.ready_count[node]
        self._failures = len(host.failures.get(node, []))
        self._out_from = 0
        self._killed = False
        self._starting: asyncio.Future[dict[str, Any]] | None = None

    def restart(self) -> None:
        """Ask the (running) host to start the node again."""
        self._out_from = self.host.output_size()
        self._starting = asyncio.ensure_future(self.host.request("start", self.node))

    @property
    def pid(self) -> int:
        return self.host.child.pid

    def poll_ready(self) -> bool:
        host = self.host
        host.refresh()
        if host.ready_count[self.node] > self._generation:
            return True
        failures = host.failures.get(self.node, [])
        if len(failures) > self._failures:
            raise RuntimeError(f"{self.node} in {host.name}: {failures[-1]}")
        if self._starting is not None and self._starting.done():
            exc = self._starting.exception()
            if exc is not None:
                raise RuntimeError(str(exc))
        if not host.running():
            raise RuntimeError(
                f"{host.name} exited with {host.child.proc.returncode} before {self.node} was "
                f"ready:\n{host.child.errors()[-3000:]}"
            )
        return False

    def running(self) -> bool:
        return not self._killed and self.host.running()

    def exit_code(self) -> int | None:
        return self.host.child.proc.poll()

    def output(self) -> str:
        with open(self.host.child.stdout_path, "rb") as f:
            f.seek(self._out_from)
            return f.read().decode(errors="replace")

    def errors(self) -> str:
        return self.host.child.errors()

    async def kill(self) -> None:
        if self.running():
            await self.host.request("kill", self.node)
        self._killed = True

    async def counters(self) -> dict[str, int]:
        if not self.running():
            return {}
        try:
            reply = await self.host.request("counters", self.node, metrics.SAMPLE_TIMEOUT)
        except ControlError:
            return {}
        return metrics.counter_values(reply.get("counters") or {})


async def await_ready(handles: Sequence[NodeForwarder], timeout: float) -> None:
    """Wait until every one of ``handles`` serves; NotReady at the first that cannot, or once
    ``timeout`` runs out, naming the nodes ready and not."""
    deadline = time.monotonic() + timeout
    pending = list(handles)
    ready: list[str] = []
    while True:
        waiting: list[NodeForwarder] = []
        failed: dict[str, str] = {}
        for h in pending:
            try:
                if h.poll_ready():
                    ready.append(h.node)
                else:
                    waiting.append(h)
            except RuntimeError as exc:
                failed[h.node] = str(exc)
        pending = waiting
        if not pending and not failed:
            return
        timed_out = time.monotonic() > deadline
        if failed or timed_out:
            names = [h.node for h in pending]
            text = not_ready_text(ready, names, failed, timeout if timed_out else None)
            raise NotReady(text, ready, [*names, *failed])
        await asyncio.sleep(POLL_EVERY)
