"""A scenario's ``trust:`` block, met as an attacker inside the run would meet it: every Data a
consumer takes, and every answer a caller takes outside its session, is validated against the
run's CA and schema.  A forger's Data, signed with the certificate the run's CA gave it (for
another namespace) or with a self-made certificate claiming the producer's identity, is refused
and counted, never taken; without validation the same Data is taken, so the check is what
stops it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import run_scenario

SCENARIO = """
name: trusted
duration: 4s
nodes: {a: {}, b: {}}
links: [{between: [a, b], delay: 1ms}]
routes: auto
trust: {ca: /lab, validate: %s}
services:
  - {name: producer, node: b, entry: "apps.workloads:producer", announce: [/lab/data],
     args: {prefix: /lab/data, size: 100}}
  - {name: functions, node: b, entry: "apps.rmi_entries:server", announce: [/lab/fn],
     args: {module: apps.demos.demo_functions, prefix: /lab/fn}}
  - {name: insider, node: b, entry: "tests.integration.scenario.entries:forger",
     args: {prefix: /lab/data/stolen, mode: own}}
  - {name: stranger, node: b, entry: "tests.integration.scenario.entries:forger",
     args: {prefix: /lab/data/forged, mode: stranger, claim: /lab/producer}}
workloads:
  - {name: consumer, node: a, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /lab/data, rate: 50}}
  - {name: caller, node: a, entry: "apps.rmi_entries:caller", start: 300ms,
     args: {function: /lab/fn/word_count, args: ["to be or not"], rate: 10}}
  - {name: fooled_by_insider, node: b, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /lab/data/stolen, rate: 10, retries: 0}}
  - {name: fooled_by_stranger, node: b, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /lab/data/forged, rate: 10, retries: 0}}
"""
ATTACKED = ("fooled_by_insider", "fooled_by_stranger")


def _run(tmp_path: Path, cpu: CpuLoad, validate: bool) -> dict[str, Any]:
    path = tmp_path / "trusted.yaml"
    path.write_text(SCENARIO % ("true" if validate else "false"))
    proc, report = run_scenario(path, tmp_path / "out", "--no-plots", timeout=cpu.budget(90))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return report


def _metric(report: dict[str, Any], process: str, name: str) -> float:
    return float(report["metrics"]["processes"][process][name])


@pytest.mark.xdist_group("trust-scenario")
def test_every_data_is_validated_and_forgeries_are_refused(tmp_path: Path, cpu: CpuLoad) -> None:
    report = _run(tmp_path, cpu, validate=True)
    wl = report["workloads"]
    honest = wl["consumer"]
    assert honest["ok"] == honest["requests"] > 0
    assert _metric(report, "consumer", "data_validated") == honest["ok"]
    assert _metric(report, "consumer", "data_refused") == 0
    calls = wl["caller"]
    assert calls["ok"] == calls["requests"] > 0
    assert _metric(report, "caller", "answers_validated") >= 1  # the session's agreement
    assert _metric(report, "caller", "answers_refused") == 0
    for attacked in ATTACKED:
        w = wl[attacked]
        assert w["requests"] > 0 and w["ok"] == 0, (attacked, w)
        assert _metric(report, attacked, "data_refused") == w["requests"], attacked
    # why: the insider's certificate is the CA's but for another namespace (the schema); the
    # stranger's chain ends in a certificate no anchor vouches for
    refusals = report["metrics"]["processes"]
    assert refusals["fooled_by_insider"]["data_refused_schema"] == wl[ATTACKED[0]]["requests"]
    assert refusals["fooled_by_stranger"]["data_refused_no_anchor"] == wl[ATTACKED[1]]["requests"]
    # the run's keys went to their processes only: spec files are private
    specs = list((tmp_path / "out" / "procs").glob("*.json"))
    assert len(specs) == 8 and all(s.stat().st_mode & 0o077 == 0 for s in specs)


@pytest.mark.xdist_group("trust-scenario")
def test_without_validation_the_same_forgeries_are_taken(tmp_path: Path, cpu: CpuLoad) -> None:
    report = _run(tmp_path, cpu, validate=False)
    for attacked in ATTACKED:
        w = report["workloads"][attacked]
        assert w["ok"] == w["requests"] > 0, (attacked, w)
