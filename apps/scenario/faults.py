"""Timed faults of a scenario run: kill or restart a node, a service or a workload; cut,
restore or reshape a link; signal a service or a workload (SIGUSR1, which its entry may take
to misbehave: :meth:`apps.scenario.entry.ServiceContext.on_signal`).

A node's kill is its machine dying: its forwarder and every process on it at once (co-located
services are inside the forwarder).  A service's or workload's kill is that one process dying
(SIGKILL by its PID) while its node stays up; the runner's monitor does not report it as a
crash.  A restart starts what was killed again, with a new log (``name.1``, ``name.2``...);
a restarted workload runs to the end of its span, appending to its results.  With ``routes:
auto``, a dead service's (or workload's) prefixes are withdrawn as a routing protocol would,
after ``reconverge_after``, and announced again when it is back.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from apps.scenario.entry import SIGNAL_FAULT
from apps.scenario.schema import FaultSpec, ServiceSpec, TargetKind, WorkloadSpec
from icn.errors import IcnError

if TYPE_CHECKING:
    from apps.scenario.runner import ScenarioRunner


class FaultError(IcnError):
    """A fault that cannot be applied now (restarting what runs, killing what is gone...)."""


def target_kind(runner: ScenarioRunner, fault: FaultSpec) -> TargetKind | None:
    target = fault.target
    return runner.sc.kind_of(target) if isinstance(target, str) else None


async def apply_fault(runner: ScenarioRunner, fault: FaultSpec) -> None:
    """Apply ``fault`` now; record it (and any error) in the run state and as an event."""
    kind = target_kind(runner, fault)
    text = fault.describe(kind)
    entry: dict[str, Any] = {
        "at": fault.at,
        "applied": None,
        "action": fault.action,
        "target": fault.describe().split(" ", 1)[1],
        "kind": kind or "link",
        # a killed workload disrupts no one else's requests: no recovery is measured after it
        "disruptive": fault.disruptive and kind != "workload",
        "error": None,
    }
    runner.state.faults.append(entry)
    began = runner.now()
    try:
        await _do_fault(runner, fault, kind)
    except (IcnError, TimeoutError, OSError) as exc:
        entry["error"] = str(exc)
        runner.event(f"fault {text} failed: {exc}")
        return
    # A kill takes effect when its SIGKILL goes, before anything is awaited; reaping the
    # process may take seconds more on a loaded Ray agent (once 3.5 s: the fault said 7.5 s
    # for a kill sent at 4 s, and recovery was measured from then).  Anything else is applied
    # once done (a restart when the node or process is back).
    entry["applied"] = round(began if fault.action == "kill" else runner.now(), 3)
    runner.event(f"fault: {text}")


async def _do_fault(runner: ScenarioRunner, fault: FaultSpec, kind: TargetKind | None) -> None:
    action, target = fault.action, fault.target
    if action == "signal":
        assert isinstance(target, str)  # validated: a service or a workload
        child = runner.procs.get(target)
        if child is None or child.proc.poll() is not None:
            raise FaultError(f"cannot signal {target}: it is not running")
        child.proc.send_signal(SIGNAL_FAULT)
        return
    if isinstance(target, str):
        if kind == "node":
            if action == "kill":
                # the routing protocol's reaction starts at the kill, not once it is reaped
                # (kill_node marks the node down before it first waits)
                await kill_node(runner, target, reroute=True)
            else:
                if target not in runner.down:
                    raise FaultError(f"cannot restart {target}: it is running")
                await restart_node(runner, target)
        elif action == "kill":
            await kill_process(runner, target)
        else:
            await restart_process(runner, target)
        return
    link = runner.sc.link_between(*target)
    assert link is not None  # validated
    fabric = runner.fabric
    if action == "cut":
        fabric.cut.add(link.name)
        await fabric.apply_shaping(link)
        runner.reroute_later(f"link {link.name} cut", failure=True)
    elif action == "restore":
        fabric.cut.discard(link.name)
        await fabric.apply_shaping(link)
        runner.reroute_later(f"link {link.name} restored", failure=False)
    else:
        shaping = fabric.shaping[link.name]
        for attr in ("delay", "jitter", "loss", "rate"):
            value = getattr(fault, attr)
            if value is not None:
                setattr(shaping, attr, value)
        await fabric.apply_shaping(link)


async def kill_node(runner: ScenarioRunner, node: str, reroute: bool = False) -> None:
    """The node's machine dies: its forwarder and everything on it, at once (a node packed
    with others: its forwarder and co-located services only, the others run on).  With
    ``reroute``, the launcher's routes react from now (after ``reconverge_after``), while the
    processes are still being reaped."""
    runner.expected_down.add(node)
    runner.down.add(node)
    if reroute:
        runner.reroute_later(f"{node} down", failure=True)
    for name in runner.procs_on(node):
        child = runner.procs.get(name)
        if child is not None and child.proc.poll() is None:
            # expected: the monitor must not report it once the node is back up and its
            # services are still being started again (one at a time)
            runner.expected_exit.add(child.pid)
            child.proc.kill()
            if runner.sc.workload(name) is not None:
                runner.stopped.add(name)  # not restarted with the node: its routes stay away
    # the launcher stops talking to its management now (a reroute meanwhile leaves it out),
    # also when a packed node's host does not answer the kill: down for the launcher either way
    runner.fabric.detach(node)
    fwd = runner.forwarders.get(node)
    if fwd is not None:
        await fwd.kill()


async def restart_node(runner: ScenarioRunner, node: str) -> None:
    """Forwarder (with its co-located services), faces and routes, then the node's other
    services, together.  The node forwards as soon as its faces and routes are back, as a
    router does after a reboot: traffic through it does not wait for its own services (under
    load each took a second or two to start, one after another, and a consumer behind the node
    stayed cut off for as long)."""
    await runner.start_node(node)
    for link in runner.fabric.links_of(node):
        await runner.fabric.connect_link(link)
    runner.reroute_later(f"{node} back", failure=False)
    await asyncio.gather(*(runner.start_service(s) for s in runner.sc.services if s.node == node))


def _process(runner: ScenarioRunner, name: str) -> ServiceSpec | WorkloadSpec:
    spec = runner.sc.service(name) or runner.sc.workload(name)
    assert spec is not None  # validated
    return spec


async def kill_process(runner: ScenarioRunner, name: str) -> None:
    """SIGKILL one service or workload by its PID; its node and the rest stay up."""
    spec = _process(runner, name)
    kind = "service" if isinstance(spec, ServiceSpec) else "workload"
    child = runner.procs.get(name)
    if spec.node in runner.down:
        raise FaultError(f"cannot kill {kind} {name}: node {spec.node} is down")
    if child is None or child.proc.poll() is not None:
        raise FaultError(f"cannot kill {kind} {name}: it is not running")
    runner.expected_exit.add(child.pid)
    child.proc.kill()
    # off the loop: on ray a wait is calls to the node's agent, seconds on a busy cluster
    await asyncio.to_thread(child.proc.wait, 5)
    runner.process_gone(spec, "killed")


async def restart_process(runner: ScenarioRunner, name: str) -> None:
    """Start a killed (or exited) service or workload again on its node."""
    spec = _process(runner, name)
    kind = "service" if isinstance(spec, ServiceSpec) else "workload"
    child = runner.procs.get(name)
    if spec.node in runner.down:
        raise FaultError(f"cannot restart {kind} {name}: node {spec.node} is down")
    if child is not None and child.proc.poll() is None:
        raise FaultError(f"cannot restart {kind} {name}: it is running")
    if isinstance(spec, ServiceSpec):
        await runner.start_service(spec)
        return
    if child is None:
        raise FaultError(f"cannot restart workload {name}: it has not started yet")
    if runner.workload_left(spec) <= 0:
        raise FaultError(f"cannot restart workload {name}: its time is over")
    await runner.start_workload(spec)
