"""Invariant checks (``ctx.check``) in the report: counted per process and invariant, a
violation or a listed invariant missing fails the run, the summary prints them with the
faults injected per kind; ``report.invariants`` validated like the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from apps.scenario.app_metrics import operations
from apps.scenario.entry import WorkloadContext
from apps.scenario.invariants import check_stats
from apps.scenario.loader import ScenarioError, parse_scenario
from apps.scenario.report import build_report, fault_counts
from apps.scenario.results import read_rows
from apps.scenario.schema import Scenario
from apps.scenario.summary import render_summary

T0 = 1000.0
ENTRY = "apps.workloads:consumer"


def scenario(invariants: list[dict[str, Any]] | None = None) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "inv",
            "duration": 10,
            "nodes": {"a": {}, "b": {}},
            "links": [{"between": ["a", "b"]}],
            "services": [{"name": "svc", "node": "b", "entry": ENTRY}],
            "workloads": [
                {"name": "calls", "node": "a", "entry": ENTRY},
                {"name": "rounds", "node": "a", "entry": ENTRY},
            ],
            "report": {"interval": 1, "invariants": invariants or []},
        }
    )


def check(name: str, held: bool, outcome: str, detail: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"t": T0 + 1, "check": name, "held": held, "outcome": outcome}
    if detail:
        row["detail"] = detail
    return row


def records(violations: int = 0) -> dict[str, list[dict[str, Any]]]:
    calls = [check("answered", True, "answered") for _ in range(8)]
    calls += [check("answered", True, "typed error Timeout") for _ in range(2)]
    calls += [check("answered", False, "no answer", f"call {i}") for i in range(violations)]
    calls.append({"t": T0 + 1, "sent": T0, "ok": True, "latency": 0.01, "bytes": 0})
    rounds = [check("bit_exact", True, "bit-exact") for _ in range(3)]
    return {"calls": calls, "rounds": rounds}


def report(sc: Scenario, recs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    faults = [
        {"at": 1.0, "applied": 1.0, "action": "kill", "target": "b", "kind": "node"},
        {"at": 2.0, "applied": 2.1, "action": "restart", "target": "b", "kind": "node"},
        {"at": 3.0, "applied": None, "action": "kill", "target": "b", "kind": "node", "error": "x"},
        {"at": 4.0, "applied": 4.0, "action": "shape", "target": ["a", "b"], "kind": "link"},
    ]
    return build_report(sc, T0, recs, [], faults, [], {"run_id": "r"})


def text(rep: dict[str, Any]) -> str:
    console = Console(record=True, width=220)
    render_summary(rep, console)
    return console.export_text()


def test_checks_are_counted_per_process_and_outcome() -> None:
    stats = check_stats(records(violations=2), ["svc", "calls", "rounds"])
    assert set(stats) == {"calls", "rounds"}  # svc reported nothing
    answered = stats["calls"]["answered"]
    assert answered["checks"] == 12 and answered["held"] == 10 and answered["violated"] == 2
    assert answered["outcomes"] == {"answered": 8, "typed error Timeout": 2, "no answer": 2}
    assert answered["violations"] == {"no answer": 2}
    assert answered["examples"] == ["no answer: call 0", "no answer: call 1"]


def test_checks_are_not_operations() -> None:
    assert len(operations(records()["calls"])) == 1


def test_held_invariants_pass_and_are_printed() -> None:
    rep = report(scenario([{"check": "answered", "process": "calls", "min_checks": 10}]), records())
    assert rep["passed"]
    rows = {(r["check"], r["process"]): r for r in rep["invariants"]}
    assert rows["answered", "calls"]["text"] == "held 10 of 10 times"
    assert rows["bit_exact", "rounds"]["passed"]  # reported without being listed: shown too
    out = text(rep)
    assert "invariants" in out and "typed error Timeout 2" in out
    assert out.strip().splitlines()[-1] == "PASSED: 2 invariants held (13 checks)"


def test_a_violation_fails_the_run_with_its_outcomes() -> None:
    rep = report(scenario(), records(violations=3))
    assert not rep["passed"]
    (bad,) = [r for r in rep["invariants"] if not r["passed"]]
    assert bad["text"] == "violated 3 of 13 times (no answer 3)"
    last = text(rep).strip().splitlines()[-1]
    assert last.startswith("FAILED: 1 of 2 invariants not held (answered of calls: violated 3")


def test_listed_invariants_missing_or_too_few_fail() -> None:
    sc = scenario(
        [
            {"check": "answered", "min_checks": 50},
            {"check": "exactly_once"},
            {"check": "bit_exact", "process": "calls"},
        ]
    )
    rep = report(sc, records())
    rows = {(r["check"], r["process"]): r for r in rep["invariants"]}
    assert rows["answered", "calls"]["text"] == "held, but only 10 checks; at least 50 wanted"
    assert rows["exactly_once", "any process"]["text"] == (
        "no check of exactly_once reported by any process"
    )
    assert rows["bit_exact", "calls"]["text"] == "no check of bit_exact reported by calls"
    assert rows["bit_exact", "rounds"]["passed"]
    assert not rep["passed"]


def test_faults_injected_are_counted_per_kind() -> None:
    rep = report(scenario(), records())
    assert rep["fault_counts"] == fault_counts(rep["faults"])
    assert rep["fault_counts"] == [
        {"fault": "kill node", "planned": 2, "applied": 1, "failed": 1},
        {"fault": "restart node", "planned": 1, "applied": 1, "failed": 0},
        {"fault": "shape link", "planned": 1, "applied": 1, "failed": 0},
    ]
    assert "faults injected" in text(rep)


def test_ctx_check_writes_a_line_the_report_reads(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    ctx = WorkloadContext(
        name="calls", node="a", args={}, transport="unix:///x", run_dir=tmp_path, results=path
    )
    ctx.check("answered", True, "answered")
    ctx.check("answered", False, "untyped error KeyError", detail="x" * 500)
    with pytest.raises(ValueError, match="needs an invariant's name"):
        ctx.check("", True, "answered")
    ctx.close()
    rows = read_rows(path)
    stats = check_stats({"calls": rows}, ["calls"])["calls"]["answered"]
    assert stats["held"] == 1 and stats["violated"] == 1
    assert len(rows[1]["detail"]) == 300


BASE = """\
name: t
nodes: {a: {}}
workloads:
  - {name: w, node: a, entry: 'apps.workloads:consumer'}
report:
  invariants:
"""


@pytest.mark.parametrize(
    ("item", "expect"),
    [
        ("{check: answered, process: nobody}", "report.invariants[0].process: no service or"),
        ("{check: answered, min_checks: 0}", "report.invariants[0].min_checks: Input should be"),
        ("{check: ''}", "report.invariants[0].check: String should have at least 1 character"),
        (
            "{chek: answered}",
            "report.invariants[0].chek: unknown field 'chek' (did you mean 'check'? valid fields:",
        ),
    ],
)
def test_bad_invariants_name_the_field(item: str, expect: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(BASE + f"    - {item}\n", "s.yaml", check_entries=False)
    found = [p.format("s.yaml") for p in info.value.problems]
    assert any(expect in msg for msg in found), found
