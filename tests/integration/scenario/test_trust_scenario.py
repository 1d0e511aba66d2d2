"""A scenario's ``trust:`` block: every Data a consumer takes, and every answer a caller takes
outside its session, is validated against the run's CA and schema (the validator's refusals are
tested as an attacker would run them in tests/integration/test_validating_consumer.py); each
process's key reaches it alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.chaos.harness import CpuLoad
from tests.integration.scenario.conftest import run_scenario

SCENARIO = """
name: trusted
duration: 4s
nodes: {a: {}, b: {}}
links: [{between: [a, b], delay: 1ms}]
routes: auto
trust: {ca: /lab}
services:
  - {name: producer, node: b, entry: "apps.workloads:producer", announce: [/lab/data],
     args: {prefix: /lab/data, size: 100}}
  - {name: functions, node: b, entry: "apps.rmi_entries:server", announce: [/lab/fn],
     args: {module: apps.demo_functions, prefix: /lab/fn}}
workloads:
  - {name: consumer, node: a, entry: "apps.workloads:consumer", start: 300ms,
     args: {prefix: /lab/data, rate: 50}}
  - {name: caller, node: a, entry: "apps.rmi_entries:caller", start: 300ms,
     args: {function: /lab/fn/word_count, args: ["to be or not"], rate: 10}}
"""


def _metric(report: dict[str, Any], process: str, name: str) -> float:
    return float(report["metrics"]["processes"][process][name])


def test_every_data_and_answer_is_validated(tmp_path: Path, cpu: CpuLoad) -> None:
    path = tmp_path / "trusted.yaml"
    path.write_text(SCENARIO)
    proc, report = run_scenario(path, tmp_path / "out", "--no-plots", timeout=cpu.budget(90))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wl = report["workloads"]
    honest = wl["consumer"]
    assert honest["ok"] == honest["requests"] > 0
    assert _metric(report, "consumer", "data_validated") == honest["ok"]
    assert _metric(report, "consumer", "data_refused") == 0
    calls = wl["caller"]
    assert calls["ok"] == calls["requests"] > 0
    assert _metric(report, "caller", "answers_validated") >= 1  # the session's agreement
    assert _metric(report, "caller", "answers_refused") == 0
    # the run's keys went to their processes only: spec files are private
    specs = list((tmp_path / "out" / "procs").glob("*.json"))
    assert len(specs) == 4 and all(s.stat().st_mode & 0o077 == 0 for s in specs)
