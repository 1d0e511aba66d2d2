"""Nodes packed into one forwarder process: a kill takes one node and leaves its neighbours
serving; a packed run reports what a run with a process per node reports.

Not marked ``fault``: the assertions are about which node went down and what the report holds,
not about recovery times, so a run under saturation would check nothing more (and the fault
worker's queue is the suite's longest)."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.scenario.forwarders import PackedForwarder
from apps.scenario.loader import parse_scenario
from apps.scenario.metrics import NODE_FIELDS
from apps.scenario.packed import NodePlan, PackedHost, Plan
from apps.scenario.runner import ScenarioRunner
from icn.dataplane import mgmt_client
from icn.dataplane.endpoint import Endpoint
from icn.errors import IcnError
from tests.integration.scenario.conftest import pid_alive


def plan_of(workdir: Path, nodes: list[str]) -> Plan:
    a, b = random.randrange(1, 255), random.randrange(0, 255)  # apart from other tests' nodes
    plans = {}
    for i, node in enumerate(nodes):
        host = f"127.{a}.{b}.{i + 1}:6363"
        cfg = {
            "log_level": "warning",
            "local_networks": [],
            "listen": {"udp": [host], "tcp": [host], "unix": str(workdir / f"{node}.sock")},
        }
        path = workdir / f"{node}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        plans[node] = NodePlan(path)
    return Plan(workdir / "packed.ctl", "warning", plans)


async def general(workdir: Path, node: str) -> dict[str, Any]:
    ep = await Endpoint.connect(f"unix://{workdir / node}.sock", connect_timeout=2.0)
    try:
        return dict(await mgmt_client.status(ep, "status/general"))
    finally:
        ep.close()


async def test_a_killed_node_takes_only_its_own_forwarder(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = PackedHost(plan_of(workdir, ["a", "b", "c"]))
    await host.serve()
    try:
        for node in ("a", "b", "c"):
            await host.start(node)
        assert capsys.readouterr().out.splitlines() == [
            "icn-packed: ready a",
            "icn-packed: ready b",
            "icn-packed: ready c",
        ]
        # each node its own tables and management: a route on a is not on c
        a = host.running["a"].daemon
        assert a is not host.running["c"].daemon and a.fw.fib is not host.running["c"].daemon.fw.fib
        assert await host.answer({"op": "kill", "node": "b"}) == {"ok": True}
        assert set(host.running) == {"a", "c"}
        for node in ("a", "c"):  # still serving their management, on their own sockets
            assert (await general(workdir, node))["nfd_version"]
        with pytest.raises((OSError, IcnError)):
            await general(workdir, "b")
        assert await host.answer({"op": "counters", "node": "b"}) == {
            "ok": False,
            "error": "b is not running",
        }
        counted = await host.answer({"op": "counters", "node": "a"})
        assert counted["ok"] and counted["counters"]["mgmt.dataset"] >= 1
        # the launcher's way in: the control socket; b comes back
        assert await request(workdir / "packed.ctl", {"op": "start", "node": "b"}) == {"ok": True}
        assert (await general(workdir, "b"))["nfd_version"]
        assert capsys.readouterr().out == "icn-packed: ready b\n"
        assert (await request(workdir / "packed.ctl", {"op": "start", "node": "b"}))[
            "error"
        ] == "b is running"
    finally:
        await host.close()
    assert not host.running and not (workdir / "packed.ctl").exists()


async def request(path: Path, body: dict[str, Any]) -> dict[str, Any]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(json.dumps(body).encode() + b"\n")
    line = await reader.readline()
    writer.close()
    return dict(json.loads(line))


SCENARIO = """\
name: packed
duration: 3s
nodes: {a: {}, b: {}, c: {}, d: {}}
links:
  - {between: [a, b], delay: 1ms}
  - {between: [b, c], delay: 1ms}
  - {between: [c, d], delay: 1ms}
reconverge_after: 300ms
services:
  - {name: producer, node: d, entry: "apps.workloads:producer", announce: [/p],
     args: {prefix: /p, size: 100}}
  - {name: beside, node: b, entry: "apps.workloads:producer", announce: [/b],
     args: {prefix: /b, size: 100}, colocate: true}
workloads:
  - {name: consumer, node: a, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /p, rate: 50, lifetime: 300ms, retries: 1}}
  - {name: near, node: a, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /b, rate: 20, lifetime: 500ms, retries: 2}}
faults:
  - {at: 1s, kill: c}
  - {at: 1.8s, restart: c}
report:
  interval: 500ms
  plots: false
  expect:  # b stays up: served all along, whatever the load does to c's restart
    - {workload: near, min_success_ratio: 50%}
"""


def fields(report: dict[str, Any]) -> set[str]:
    """A report's fields two levels down (``nodes.c.restarts``, ``faults[].recovery``...),
    not those named by what happened (counters by name, errors by kind)."""
    out = set(report)
    for section in ("nodes", "links", "workloads", "meta"):
        for name, entry in report[section].items():
            keys = entry if isinstance(entry, dict) else {"": None}
            out |= {f"{section}.{name}.{k}" for k in keys}
    for section in ("faults", "expectations", "route_events"):
        out |= {f"{section}[].{k}" for item in report[section] for k in item}
    return out


async def run(tmp_path: Path, per_process: int) -> tuple[ScenarioRunner, dict[str, Any], int]:
    sc = parse_scenario(f"nodes_per_process: {per_process}\n" + SCENARIO, "packed.yaml")
    seen: dict[str, int] = {}

    def on_event(t: float | None, text: str) -> None:
        if text == "fault: kill c":  # right after the kill: is c's process still there?
            fwd = runner.forwarders["a"]
            seen["pid"] = fwd.pid if pid_alive(fwd.pid) else 0

    runner = ScenarioRunner(sc, tmp_path / f"out{per_process}", on_event=on_event)
    report = await runner.run()
    return runner, report, seen.get("pid", -1)


@pytest.mark.slow
async def test_a_packed_run_reports_as_a_process_per_node_does(
    tmp_path: Path, state_dir: Path
) -> None:
    # both at once: half the wall time, and each run meets the other's load
    (packed, report, pid_after_kill), (solo, alone, solo_pid_after_kill) = await asyncio.gather(
        run(tmp_path, 4), run(tmp_path, 1)
    )
    assert len(packed.groups) == 1 and isinstance(packed.forwarders["a"], PackedForwarder)
    host_pid = packed.hosts[0].child.pid
    assert pid_after_kill == host_pid  # the kill of c left the process of a, b and d running
    events = [e["text"] for e in report["meta"]["events"]]
    assert "fault: kill c" in events and "fault: restart c" in events
    assert not [e for e in events if "crashed" in e or "exited" in e], events
    # the kill counted like any other: applied, c restarted once, its neighbours never down
    kinds = {(f["action"], f["kind"], f["error"]) for f in report["faults"]}
    assert kinds == {("kill", "node", None), ("restart", "node", None)}
    nodes = report["nodes"]
    assert nodes["c"]["restarts"] == 1 and nodes["c"]["down_samples"] >= 1
    assert all(nodes[n]["down_samples"] == 0 and nodes[n]["restarts"] == 0 for n in "abd")
    # counters sampled per node: each its own (b forwarded for a, d only answered from c)
    assert nodes["b"]["totals"]["fw.in_interest"] > 0 and nodes["a"]["counters"]["fw.in_interest"]
    assert nodes["a"]["totals"] != nodes["d"]["totals"]
    assert report["workloads"]["near"]["ok"] > 0  # (the consumer's through c: load decides)
    assert report["passed"], (report["expectations"], events)
    # the co-located service ran in the host beside b's forwarder
    log = (tmp_path / "out4" / "logs" / "packed-0.out").read_text()
    assert "icn-scenario: ready beside\n" in log and not pid_alive(host_pid)

    assert len(solo.groups) == 4 and solo_pid_after_kill == solo.forwarders["a"].pid
    assert fields(report) == fields(alone)
    for node in "abcd":  # the same counters sampled: status/general's and the forwarder's own
        assert {*NODE_FIELDS, "fw.in_interest"} <= alone["nodes"][node]["counters"].keys()
        assert {*NODE_FIELDS, "fw.in_interest"} <= report["nodes"][node]["counters"].keys()
    assert alone["nodes"]["c"]["restarts"] == 1
    assert alone["passed"], (alone["expectations"], alone["meta"]["events"])
    assert [(f["action"], f["error"]) for f in alone["faults"]] == [
        (f["action"], f["error"]) for f in report["faults"]
    ]
