"""Metrics from services and workloads in the report: last values, totals, expectations,
the summary table; and faults on services and workloads in the report's text."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from apps.scenario.app_metrics import last_values, metric_stats, operations
from apps.scenario.report import build_report, check_expectations, fault_text
from apps.scenario.schema import Scenario
from apps.scenario.summary import render_summary

T0 = 1000.0


def scenario(*expect: dict[str, Any]) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "m",
            "duration": 10,
            "nodes": {"a": {}, "b": {}},
            "links": [{"between": ["a", "b"]}],
            "services": [{"name": "agg", "node": "b", "entry": "m:f"}],
            "workloads": [
                {"name": "w1", "node": "a", "entry": "m:f", "start": 1},
                {"name": "w2", "node": "a", "entry": "m:f", "start": 1},
            ],
            "report": {"interval": 1, "expect": list(expect)},
        }
    )


def metric(t: float, name: str, value: float) -> dict[str, Any]:
    return {"t": T0 + t, "metric": name, "value": value}


def op(t: float, ok: bool = True) -> dict[str, Any]:
    return {"t": T0 + t, "sent": T0 + t - 0.01, "ok": ok, "latency": 0.01, "bytes": 10}


RECORDS = {
    # cumulative totals reported from time to time: the last one counts
    "w1": [op(2), metric(2, "bytes_resent", 10), op(3), metric(3, "bytes_resent", 30)],
    "w2": [metric(2.5, "bytes_resent", 5), op(4, ok=False)],
    "agg": [metric(5, "bytes_resent", 7), metric(5, "children", 2)],
    "stranger": [metric(5, "bytes_resent", 1000)],  # not in the scenario: ignored
}


def test_last_values_by_time_not_by_line() -> None:
    rows = [metric(3, "x", 3), metric(1, "x", 1), op(2), metric(2, "y", 2)]
    assert last_values(rows) == {"x": 3.0, "y": 2.0}
    assert operations(rows) == [op(2)]


def test_metric_stats_per_process_and_totals() -> None:
    stats = metric_stats(RECORDS, ["agg", "w1", "w2", "silent"])
    assert stats["processes"] == {
        "agg": {"bytes_resent": 7.0, "children": 2.0},
        "w1": {"bytes_resent": 30.0},
        "w2": {"bytes_resent": 5.0},
    }
    assert stats["totals"] == {"bytes_resent": 42.0, "children": 2.0}


def test_build_report_keeps_metrics_out_of_the_operations() -> None:
    report = build_report(scenario(), T0, RECORDS, [], [], [], {})
    assert report["workloads"]["w1"]["requests"] == 2 and report["workloads"]["w1"]["ok"] == 2
    assert report["workloads"]["w2"]["requests"] == 1
    assert report["metrics"]["totals"] == {"bytes_resent": 42.0, "children": 2.0}
    assert "stranger" not in report["metrics"]["processes"]
    empty = build_report(scenario(), T0, {}, [], [], [], {})
    assert empty["metrics"] == {"processes": {}, "totals": {}}


def test_metric_expectations() -> None:
    sc = scenario(
        {"metric": "bytes_resent", "min": 1, "max": 40},
        {"metric": "bytes_resent", "process": "w2", "max": 0},
        {"metric": "bytes_from_caches", "min": 1},
        {"metric": "children", "process": "w1", "min": 1},
    )
    stats = metric_stats(RECORDS, ["agg", "w1", "w2"])
    res = check_expectations(sc, {}, stats)
    assert [(r["subject"], r["criterion"], r["passed"], r["text"]) for r in res] == [
        ("metric bytes_resent", "min", True, "total bytes_resent 42 >= 1"),
        ("metric bytes_resent", "max", False, "total bytes_resent 42 > 40"),
        ("metric bytes_resent of w2", "max", False, "bytes_resent of w2 5 > 0"),
        (
            "metric bytes_from_caches",
            "min",
            False,
            "no service or workload reported metric bytes_from_caches",
        ),
        ("metric children of w1", "min", False, "w1 reported no metric children"),
    ]
    assert res[0]["actual"] == 42.0 and res[0]["workload"] is None
    assert res[0]["metric"] == "bytes_resent" and res[2]["process"] == "w2"


def console_text(report: dict[str, Any]) -> str:
    console = Console(record=True, width=200)
    render_summary(report, console)
    return console.export_text()


def test_summary_shows_metrics_and_metric_expectations() -> None:
    sc = scenario({"metric": "bytes_resent", "max": 40})
    text = console_text(build_report(sc, T0, RECORDS, [], [], [], {}))
    assert "metrics (last values)" in text
    lines = [ln.split() for ln in text.splitlines()]
    assert ["w1", "bytes_resent", "30"] in lines and ["total", "bytes_resent", "42"] in lines
    assert text.strip().splitlines()[-1] == (
        "FAILED: 1 of 1 expectations failed (metric bytes_resent: total bytes_resent 42 > 40)"
    )
    assert "metrics" not in console_text(build_report(scenario(), T0, {}, [], [], [], {}))


@pytest.mark.parametrize(
    ("fault", "text"),
    [
        ({"action": "kill", "target": "b", "kind": "node"}, "kill b"),
        ({"action": "kill", "target": "agg", "kind": "service"}, "kill service agg"),
        ({"action": "restart", "target": "w1", "kind": "workload"}, "restart workload w1"),
        ({"action": "cut", "target": ["a", "b"], "kind": "link"}, "cut a-b"),
        ({"action": "kill", "target": "b"}, "kill b"),  # reports written before kinds
    ],
)
def test_fault_text_names_the_kind(fault: dict[str, Any], text: str) -> None:
    assert fault_text(fault) == text


def test_recovery_after_a_service_kill() -> None:
    faults = [
        {
            "at": 3.0,
            "applied": 3.0,
            "action": "kill",
            "target": "agg",
            "kind": "service",
            "disruptive": True,
            "error": None,
        }
    ]
    records = {"w1": [op(2), op(3.5, ok=False), {**op(4.2), "sent": T0 + 4.0}]}
    report = build_report(scenario(), T0, records, [], faults, [], {})
    (rec,) = report["workloads"]["w1"]["recovery"]
    assert rec["fault"] == "kill service agg" and rec["recovery_s"] == pytest.approx(1.2)
    assert report["faults"][0]["text"] == "kill service agg"
    assert report["faults"][0]["recovery"]["w1"] == pytest.approx(1.2)


def test_summary_shows_cache_counters_when_nodes_have_them() -> None:
    samples = [
        {"t": 0.0, "nodes": {"a": {"fw.cs_hit": 0, "fw.cs_hit_bytes": 0}, "b": None}},
        {"t": 1.0, "nodes": {"a": {"fw.cs_hit": 3, "fw.cs_hit_bytes": 2_500_000}, "b": None}},
    ]
    report = build_report(scenario(), T0, RECORDS, samples, [], [], {})
    assert report["nodes"]["a"]["totals"] == {"fw.cs_hit": 3, "fw.cs_hit_bytes": 2_500_000}
    lines = [ln.split() for ln in console_text(report).splitlines()]
    header = next(ln for ln in lines if ln[:1] == ["node"])
    assert header[-3:] == ["fw.cs_hit", "fw.cs_hit_bytes", "restarts"]
    assert ["a", "-", "-", "-", "-", "-", "3", "2,500,000", "0"] in lines
    # the whole numbers of metrics are printed in full
    big = {**RECORDS, "agg": [metric(5, "bytes_sent", 4_247_302)]}
    text = console_text(build_report(scenario(), T0, big, [], [], [], {}))
    assert "4,247,302" in text
    assert "fw.cs_hit" not in console_text(build_report(scenario(), T0, {}, [], [], [], {}))


# -- shares and timelines (calls per replica) -----------------------------------------------------


def replicas(*expect: dict[str, Any], timelines: list[str] | None = None) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "reps",
            "duration": 10,
            "nodes": {"a": {}, "b": {}},
            "links": [{"between": ["a", "b"]}],
            "services": [{"name": r, "node": "b", "entry": "m:f"} for r in ("r1", "r2", "r3")],
            "workloads": [{"name": "w", "node": "a", "entry": "m:f"}],
            "report": {"interval": 2, "expect": list(expect), "timelines": timelines or []},
        }
    )


# r1 serves 10 calls a second until 5 s, then 1; r2 and r3 share the rest of 20 a second
CALLS = {
    "r1": [metric(t, "calls", 10 * min(t, 5) + max(0, t - 5)) for t in range(11)],
    "r2": [metric(t, "calls", 5 * min(t, 5) + 9.5 * max(0, t - 5)) for t in range(11)],
    "r3": [metric(t, "calls", 5 * min(t, 5) + 9.5 * max(0, t - 5)) for t in range(11)],
}


def test_a_share_of_a_metric_since_a_time() -> None:
    sc = replicas(
        {"metric": "calls", "process": "r1", "max_share": "10%", "since": "6s"},
        {"metric": "calls", "process": "r1", "max_share": "10%"},  # over the whole run
        {"metric": "calls", "process": "r2", "min_share": "40%", "since": "6s"},
    )
    report = build_report(sc, T0, CALLS, [], [], [], {})
    (late, whole, r2) = report["expectations"]
    assert late["passed"] and late["actual"] == pytest.approx(4 / 80)
    assert "r1's share of calls from 6s to 10s: 5% (4 of 80) <= 10%" in late["text"]
    assert not whole["passed"] and whole["actual"] == pytest.approx(55 / 200)
    assert r2["passed"] and r2["actual"] == pytest.approx(38 / 80)


def test_timelines_give_each_process_its_increase_per_bucket() -> None:
    report = build_report(replicas(timelines=["calls"]), T0, CALLS, [], [], [], {})
    rows = report["metrics"]["timelines"]["calls"]
    assert list(rows) == ["r1", "r2", "r3"]
    assert [r["count"] for r in rows["r1"]] == [20, 20, 11, 2, 2]
    assert [r["per_s"] for r in rows["r1"]] == [10, 10, 5.5, 1, 1]
    assert sum(r["count"] for r in rows["r2"]) == 5 * 5 + 9.5 * 5


def test_share_expectations_need_a_process_and_since_needs_a_share() -> None:
    with pytest.raises(ValueError, match="whose share"):
        replicas({"metric": "calls", "max_share": "10%"})
    with pytest.raises(ValueError, match="since: only max_share and min_share"):
        replicas({"metric": "calls", "max": 3, "since": "2s"})


def test_p99_ratio_of_two_workloads() -> None:
    sc = Scenario.model_validate(
        {
            "name": "clones",
            "duration": 10,
            "nodes": {"a": {}},
            "workloads": [
                {"name": "plain", "node": "a", "entry": "m:f"},
                {"name": "cloned", "node": "a", "entry": "m:f"},
            ],
            "report": {
                "expect": [
                    {"workload": "cloned", "baseline": "plain", "max_p99_ratio": "33%"},
                    {"workload": "plain", "baseline": "cloned", "max_p99_ratio": "33%"},
                ]
            },
        }
    )

    def ops(slow: float) -> list[dict[str, Any]]:
        return [
            {"t": T0 + 1 + i / 10, "sent": T0 + i / 10, "ok": True, "bytes": 0,
             "latency": slow if i % 10 == 0 else 0.02}
            for i in range(100)
        ]  # fmt: skip

    report = build_report(sc, T0, {"plain": ops(2.0), "cloned": ops(0.1)}, [], [], [], {})
    (good, bad) = report["expectations"]
    assert good["passed"] and good["actual"] == pytest.approx(0.05, rel=0.01)
    assert "(20x lower)" in good["text"]
    assert not bad["passed"] and bad["actual"] == pytest.approx(20, rel=0.01)
    with pytest.raises(ValueError, match="max_p99_ratio and baseline go together"):
        wrong = {"workload": "plain", "baseline": "x", "min_throughput": 1}
        Scenario.model_validate({**sc.model_dump(), "report": {"expect": [wrong]}})
