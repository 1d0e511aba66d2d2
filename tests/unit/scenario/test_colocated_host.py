"""Co-located services without sockets: the host's command line and spec files, the context
an entry gets, and a service run beside an in-process forwarder on an in-memory face."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from apps.inproc import attach_endpoint
from apps.scenario.colocated import (
    ERROR_COUNTER,
    exited_services,
    host_argv,
    run_service,
)
from apps.scenario.entry import ServiceContext, WorkloadContext, make_context
from apps.scenario.runner import ScenarioRunner
from apps.scenario.schema import Scenario
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.mgmt.manager import install_management
from icn.wire.name import from_uri, generic
from tests.chaos.harness import CpuLoad

PRODUCER = "apps.workloads:producer"


def scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "co",
            "nodes": {"a": {}, "b": {}},
            "links": [{"between": ["a", "b"]}],
            "services": [
                {"name": "p", "node": "b", "entry": PRODUCER, "colocate": True},
                {"name": "q", "node": "b", "entry": PRODUCER, "colocate": True},
                {"name": "r", "node": "a", "entry": PRODUCER},
            ],
        }
    )


def test_host_argv_and_runner_node_argv(tmp_path: Path) -> None:
    assert host_argv(Path("c.yaml"), [Path("p.json")]) == [
        sys.executable,
        "-m",
        "apps.scenario.colocated",
        "c.yaml",
        "p.json",
    ]
    runner = ScenarioRunner(scenario(), tmp_path, run_id="abc123")
    argv = runner.node_argv("b")
    assert argv[1:4] == ["-m", "apps.scenario.colocated", str(tmp_path / "config" / "b.yaml")]
    assert argv[4:] == [str(tmp_path / "procs" / "p.json"), str(tmp_path / "procs" / "q.json")]
    spec = json.loads((tmp_path / "procs" / "p.json").read_text())
    assert spec["kind"] == "service" and spec["node"] == "b"
    assert spec["links"] == [["a", "b"]]
    assert spec["results"] == str(tmp_path / "results" / "p.jsonl")
    # a node without co-located services runs the plain forwarder
    assert runner.node_argv("a")[-3:] == ["fwd", "--config", str(tmp_path / "config" / "a.yaml")]


def test_exited_lines_are_parsed() -> None:
    out = "icn-scenario: ready p\nicn-scenario: exited p 1: RuntimeError: boom\n"
    out += "icn-scenario: exited q 0: \n"
    assert exited_services(out) == [("p", 1, "RuntimeError: boom"), ("q", 0, "")]


def test_metrics_and_records_share_the_results_file(tmp_path: Path) -> None:
    spec: dict[str, Any] = {
        "kind": "workload",
        "name": "w",
        "node": "a",
        "transport": "unix:///nowhere",
        "run_dir": str(tmp_path),
        "results": str(tmp_path / "w.jsonl"),
        "duration": 5,
        "links": [["a", "b"]],
    }
    ctx = make_context(spec)
    assert isinstance(ctx, WorkloadContext) and ctx.links == [("a", "b")]
    ctx.record(True, 0.01, nbytes=10)
    ctx.metric("bytes_resent", 3)
    with pytest.raises(ValueError, match="not a finite number"):
        ctx.metric("x", float("nan"))
    ctx.close()
    rows = [json.loads(x) for x in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert rows[0]["ok"] is True and rows[1]["metric"] == "bytes_resent"
    assert rows[1]["value"] == 3.0
    svc = make_context({**spec, "kind": "service", "name": "s", "results": None})
    assert type(svc) is ServiceContext
    svc.metric("m", 1)  # without a results file: kept nowhere, no error
    svc.close()


async def boom(ctx: ServiceContext) -> None:
    ctx.ready()
    raise RuntimeError("boom")


async def bad_args(ctx: ServiceContext) -> None:
    raise SystemExit("args.size: expected an int")


def daemon() -> ForwarderDaemon:
    d = ForwarderDaemon(config_from_dict({"listen": {}, "log_level": "warning"}, "test"))
    d.mgmt = install_management(d)  # what start() does, without listeners, signals or timers
    return d


def spec_of(entry: str, name: str, tmp_path: Path, **args: Any) -> dict[str, Any]:
    return {
        "kind": "service",
        "name": name,
        "node": "b",
        "entry": entry,
        "args": args,
        "transport": "unix:///not-used",
        "run_dir": str(tmp_path),
    }


async def test_a_colocated_producer_serves_through_an_in_memory_face(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cpu: CpuLoad
) -> None:
    d = daemon()
    task = asyncio.ensure_future(run_service(d, spec_of(PRODUCER, "p", tmp_path, prefix="/co")))
    async with asyncio.timeout(cpu.budget(5)):
        while "icn-scenario: ready p" not in capsys.readouterr().out:
            await asyncio.sleep(0.01)
    consumer = attach_endpoint(d, label="consumer")
    lifetime_ms = round(cpu.budget(1.0) * 1000)  # one Interest, no retry: as the CPU allows
    data = await consumer.express(from_uri("/co") + generic("1"), lifetime_ms=lifetime_ms)
    assert len(data.wire) > 1024
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    consumer.close()
    assert d.counters[ERROR_COUNTER] == 0


async def test_a_failing_colocated_service_is_reported_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = daemon()
    here = __name__
    await run_service(d, spec_of(f"{here}:boom", "b1", tmp_path))
    await run_service(d, spec_of(f"{here}:bad_args", "b2", tmp_path))
    out, err = capsys.readouterr()
    assert exited_services(out) == [
        ("b1", 1, "RuntimeError: boom"),
        ("b2", 1, "args.size: expected an int"),
    ]
    assert "b2: args.size: expected an int" in err
    assert d.counters[ERROR_COUNTER] == 2
