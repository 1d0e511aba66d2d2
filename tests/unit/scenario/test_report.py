"""The scenario report over synthetic records and samples: statistics, checks, output files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from apps.scenario.report import (
    build_report,
    check_expectations,
    link_stats,
    node_stats,
    workload_stats,
    write_report,
)
from apps.scenario.schema import Scenario
from apps.scenario.summary import render_summary

T0 = 1000.0
ENTRY = "apps.workloads:consumer"


def scenario(**over: Any) -> Scenario:
    base: dict[str, Any] = {
        "name": "demo",
        "description": "two workloads across a killed router",
        "duration": 20,
        "nodes": {"a": {}, "b": {}, "c": {}},
        "links": [{"between": ["a", "b"]}, {"between": ["b", "c"]}],
        "workloads": [
            {"name": "w", "node": "a", "entry": ENTRY, "start": 2, "duration": 10},
            {"name": "late", "node": "a", "entry": ENTRY, "start": 13},
        ],
        "faults": [{"at": 5, "kill": "b"}, {"at": 8, "restart": "b"}],
        "report": {"interval": 1},
    }
    base.update(over)
    return Scenario.model_validate(base)


def make_records(fail_from: int = 12, fail_to: int = 18) -> list[dict[str, Any]]:
    """40 requests every 0.25s from 2s; those sent in [fail_from, fail_to) time out after 1s."""
    recs = []
    for i in range(40):
        sent = T0 + 2 + i * 0.25
        if fail_from <= i < fail_to:
            recs.append(
                {
                    "t": sent + 1,
                    "sent": sent,
                    "ok": False,
                    "latency": None,
                    "bytes": 0,
                    "error": "timeout",
                }
            )
        else:
            lat = 0.01 + (i % 5) * 0.002
            recs.append(
                {
                    "t": sent + lat,
                    "sent": sent,
                    "ok": True,
                    "latency": lat,
                    "bytes": 100,
                    "error": None,
                }
            )
    return recs


FAULTS = [
    {"at": 5.0, "applied": 5.0, "action": "kill", "target": "b", "disruptive": True, "error": None},
    {
        "at": 8.0,
        "applied": 8.01,
        "action": "restart",
        "target": "b",
        "disruptive": False,
        "error": None,
    },
]


def wstats(records: list[dict[str, Any]], faults: list[dict[str, Any]] = FAULTS) -> dict:
    sc = scenario()
    return workload_stats(sc.workloads[0], records, T0, sc.duration, 1.0, faults)


# ---------------------------------------------------------------------------------- workloads


def test_counts_ratio_throughput_and_errors() -> None:
    s = wstats(make_records())
    assert (s["requests"], s["ok"], s["failed"]) == (40, 34, 6)
    assert s["success_ratio"] == pytest.approx(34 / 40)
    assert s["active"] == {"start": 2.0, "end": 12.0}
    assert s["throughput"] == pytest.approx(34 / 10)  # over the 10s the workload was active
    assert s["errors"] == {"timeout": 6}
    assert s["bytes"] == 3400


def test_latency_percentiles_match_numpy() -> None:
    recs = make_records()
    ms = np.array([r["latency"] * 1000 for r in recs if r["ok"]])
    lat = wstats(recs)["latency_ms"]
    for q in (50, 90, 99):
        assert lat[f"p{q}"] == pytest.approx(np.percentile(ms, q, method="linear"))
    assert lat["max"] == pytest.approx(ms.max())
    assert lat["mean"] == pytest.approx(ms.mean())


def test_timeline_buckets_by_completion_time() -> None:
    tl = wstats(make_records())["timeline"]
    assert [b["t"] for b in tl] == [float(t) for t in range(2, 12)]
    assert sum(b["ok"] for b in tl) == 34 and sum(b["failed"] for b in tl) == 6
    assert (tl[0]["ok"], tl[0]["failed"], tl[0]["throughput"]) == (4, 0, 4.0)
    # sent 5.0-6.25 all failed, reported at sent + 1s: buckets 6s and 7s
    assert (tl[3]["ok"], tl[3]["failed"]) == (0, 0)
    assert tl[3]["p50_ms"] is None and tl[3]["throughput"] == 0.0
    assert (tl[4]["ok"], tl[4]["failed"]) == (2, 4)
    assert (tl[5]["ok"], tl[5]["failed"]) == (4, 2)
    first = [r["latency"] * 1000 for r in make_records()[:4]]
    assert tl[0]["p99_ms"] == pytest.approx(np.percentile(first, 99, method="linear"))


def test_timeline_last_bucket_uses_its_own_width() -> None:
    sc = scenario()
    spec = sc.workloads[0]  # 10s active
    recs = [
        {"t": T0 + 11.8, "sent": T0 + 11.7, "ok": True, "latency": 0.1, "bytes": 1, "error": None}
    ]
    tl = workload_stats(spec, recs, T0, sc.duration, 3.0, [])["timeline"]
    assert [b["t"] for b in tl] == [2.0, 5.0, 8.0, 11.0]
    assert tl[-1]["ok"] == 1 and tl[-1]["throughput"] == pytest.approx(1.0)


def test_recovery_after_a_kill() -> None:
    rec = wstats(make_records())["recovery"]
    # the restart is not disruptive: only the kill counts
    assert len(rec) == 1 and rec[0]["fault"] == "kill b" and rec[0]["at"] == 5.0
    # first success sent after the kill: sent at 6.5s, latency 0.016s
    assert rec[0]["recovery_s"] == pytest.approx(1.5 + 0.016)


def test_recovery_none_when_never_recovered() -> None:
    rec = wstats(make_records(fail_from=12, fail_to=40))["recovery"]
    assert rec == [{"fault": "kill b", "at": 5.0, "recovery_s": None}]


def test_recovery_ignores_faults_outside_the_span_and_failed_faults() -> None:
    faults = [
        {**FAULTS[0], "applied": 15.0},  # after the workload ended
        {**FAULTS[0], "error": "no such process"},  # never happened
        {
            "at": 4,
            "applied": 4.0,
            "action": "cut",
            "target": "a-b",
            "disruptive": True,
            "error": None,
        },
    ]
    rec = wstats(make_records(), faults)["recovery"]
    assert [r["fault"] for r in rec] == ["cut a-b"]


def test_no_records() -> None:
    s = wstats([])
    assert (s["requests"], s["ok"], s["failed"]) == (0, 0, 0)
    assert s["success_ratio"] is None and s["throughput"] == 0.0
    assert set(s["latency_ms"].values()) == {None}
    assert len(s["timeline"]) == 10 and s["recovery"][0]["recovery_s"] is None


# ---------------------------------------------------------------------------------- counters


def sample(t: float, nodes: dict[str, Any], ab: tuple | None, ba: tuple | None) -> dict:
    dirs = {}
    if ab is not None:
        dirs["a>b"] = {"bytes": ab[0], "packets": ab[1]}
    if ba is not None:
        dirs["b>a"] = {"bytes": ba[0], "packets": ba[1]}
    return {"t": t, "nodes": nodes, "links": {"a-b": dirs}}


def counters(n: int) -> dict[str, int]:
    return {"n_in_interests": n, "n_out_data": n // 2, "n_pit_entries": 3}


def make_samples() -> list[dict[str, Any]]:
    """b is down at 2s (b>a missing, then its counter restarts at 400, above the old 150);
    a restarts between 4s and 5s without a down sample (its counters go down)."""
    return [
        sample(0, {"a": counters(10), "b": counters(5)}, (100, 1), (50, 1)),
        sample(1, {"a": counters(20), "b": counters(10)}, (300, 3), (150, 2)),
        sample(2, {"a": counters(30), "b": None}, (500, 5), None),
        sample(3, {"a": counters(40), "b": counters(3)}, (600, 6), (400, 3)),
        sample(4, {"a": counters(50), "b": counters(6)}, (700, 7), (450, 4)),
        sample(5, {"a": counters(5), "b": counters(9)}, (50, 1), (460, 5)),
    ]


def test_link_totals_handle_resets() -> None:
    link = link_stats(make_samples(), ["a-b"])["a-b"]
    # from the first sample on: 200 + 200 + 100 + 100 + 50 (reset: counts from 0)
    assert link["a>b"] == {"bytes": 650, "packets": 7, "dropped": 0}
    # 100, then b restarted while down: 400 counts in full, then + 50 + 10
    assert link["b>a"] == {"bytes": 560, "packets": 1 + 3 + 1 + 1, "dropped": 0}
    assert link["total_bytes"] == 650 + 560


def test_link_rate_timeline() -> None:
    tl = link_stats(make_samples(), ["a-b"])["a-b"]["timeline"]
    assert [p["t"] for p in tl] == [0, 1, 2, 3, 4, 5]
    assert tl[0]["a>b_bytes_per_s"] is None  # baseline
    assert tl[1]["a>b_bytes_per_s"] == pytest.approx(200.0)
    assert tl[2]["b>a_bytes_per_s"] is None  # b was down
    assert tl[3]["b>a_bytes_per_s"] == pytest.approx(400 / 2)  # since the value at 1s
    assert tl[5]["a>b_bytes_per_s"] == pytest.approx(50.0)


def test_link_names_with_dashes_and_missing_links() -> None:
    samples = [
        {"t": 0, "nodes": {}, "links": {"x-1-y": {"x-1>y": {"bytes": 0, "packets": 0}}}},
        {"t": 1, "nodes": {}, "links": {"x-1-y": {"x-1>y": {"bytes": 10, "packets": 1}}}},
    ]
    out = link_stats(samples, ["x-1-y", "p-q"])
    assert out["x-1-y"]["x-1>y"] == {"bytes": 10, "packets": 1, "dropped": 0}
    assert out["x-1-y"]["y>x-1"] == {"bytes": 0, "packets": 0, "dropped": 0}
    assert out["p-q"]["total_bytes"] == 0


def test_node_stats_restarts_and_totals() -> None:
    nodes = node_stats(make_samples())
    a, b = nodes["a"], nodes["b"]
    assert a["counters"] == counters(5) and b["counters"] == counters(9)
    assert (b["restarts"], b["down_samples"]) == (1, 1)
    assert (a["restarts"], a["down_samples"]) == (1, 0)  # detected by its counters going down
    assert a["totals"]["n_in_interests"] == 10 + 10 + 10 + 10 + 5
    assert b["totals"]["n_in_interests"] == 5 + 3 + 3 + 3
    assert "n_pit_entries" not in a["totals"]  # a gauge, not a count


def test_node_down_from_the_start_is_not_a_restart() -> None:
    samples = [
        {"t": 0, "nodes": {"a": None}, "links": {}},
        {"t": 1, "nodes": {"a": counters(4)}, "links": {}},
    ]
    a = node_stats(samples)["a"]
    assert (a["restarts"], a["down_samples"]) == (0, 1)
    assert a["totals"]["n_in_interests"] == 4  # started during the run: counts in full


# ---------------------------------------------------------------------------------- checks


def expect(*entries: dict[str, Any]) -> Scenario:
    return scenario(report={"interval": 1, "expect": list(entries)})


def results(sc: Scenario, records: dict[str, list]) -> list[dict[str, Any]]:
    workloads = {
        w.name: workload_stats(w, records.get(w.name, []), T0, sc.duration, 1.0, FAULTS)
        for w in sc.workloads
    }
    return check_expectations(sc, workloads)


def test_expectations_pass_and_fail() -> None:
    sc = expect(
        {
            "workload": "w",
            "min_success_ratio": "80%",
            "max_p99_latency": "50ms",
            "min_throughput": 3,
            "max_recovery": "2s",
        },
        {
            "workload": "w",
            "min_success_ratio": 0.9,
            "max_p99_latency": "10ms",
            "min_throughput": 5,
            "max_recovery": "1s",
        },
    )
    res = results(sc, {"w": make_records()})
    assert [(r["criterion"], r["passed"]) for r in res] == [
        ("min_success_ratio", True),
        ("max_p99_latency", True),
        ("min_throughput", True),
        ("max_recovery", True),
        ("min_success_ratio", False),
        ("max_p99_latency", False),
        ("min_throughput", False),
        ("max_recovery", False),
    ]
    assert res[0]["text"] == "success ratio 85% >= 80%"
    assert res[0]["actual"] == pytest.approx(0.85) and res[0]["expected"] == pytest.approx(0.8)
    assert res[4]["text"] == "success ratio 85% < 90%"
    assert res[1]["actual"] == pytest.approx(wstats(make_records())["latency_ms"]["p99"] / 1000)
    assert res[5]["text"].startswith("p99 latency ") and "> 10ms" in res[5]["text"]
    assert res[6]["text"] == "throughput 3.4/s < 5/s"
    assert res[3]["actual"] == pytest.approx(1.516)
    assert res[7]["text"] == "worst recovery 1.516s after kill b > 1s"


def test_max_recovery_fails_without_a_fault_in_the_workload() -> None:
    sc = expect({"workload": "late", "max_recovery": "5s"})
    late = [
        {"t": T0 + 14, "sent": T0 + 13.9, "ok": True, "latency": 0.1, "bytes": 1, "error": None}
    ]
    (res,) = results(sc, {"late": late})
    assert not res["passed"] and res["actual"] is None
    assert "no kill or cut was applied while late ran" in res["text"]


def test_max_recovery_fails_when_never_recovered() -> None:
    sc = expect({"workload": "w", "max_recovery": "5s"})
    (res,) = results(sc, {"w": make_records(fail_to=40)})
    assert not res["passed"] and res["text"] == "never recovered after kill b at 5s"


def test_expectations_without_data_fail() -> None:
    sc = expect({"workload": "w", "min_success_ratio": "1%", "max_p99_latency": "1s"})
    res = results(sc, {})
    assert [r["passed"] for r in res] == [False, False]
    assert check_expectations(sc, {})[0]["text"] == "no results for workload w"


# ---------------------------------------------------------------------------------- report


def full_report(sc: Scenario | None = None) -> dict[str, Any]:
    sc = sc or expect(
        {"workload": "w", "min_success_ratio": "80%", "max_recovery": "2s"},
        {"workload": "w", "min_throughput": 10},
    )
    meta = {"run_id": "r1", "backend": "local", "out_dir": Path("/tmp/x"), "wall": 20.5}
    route_events = [{"t": 6.0, "reason": "node b down", "changes": 4}]
    return build_report(sc, T0, {"w": make_records()}, make_samples(), FAULTS, route_events, meta)


def test_build_report_is_json_ready() -> None:
    report = full_report()
    again = json.loads(json.dumps(report, allow_nan=False))
    assert again == report
    assert report["scenario"] == "demo" and report["duration"] == 20.0
    assert report["meta"]["out_dir"] == "/tmp/x"
    assert set(report["workloads"]) == {"w", "late"}
    assert report["workloads"]["late"]["requests"] == 0
    assert set(report["nodes"]) == {"a", "b", "c"}  # c never sampled, still listed
    assert set(report["links"]) == {"a-b", "b-c"}
    assert report["links"]["a-b"]["a>b"]["bytes"] == 650
    kill, restart = report["faults"]
    assert kill["text"] == "kill b" and kill["recovery"]["w"] == pytest.approx(1.516)
    assert restart["recovery"] == {}
    assert report["route_events"][0]["changes"] == 4
    assert [e["passed"] for e in report["expectations"]] == [True, True, False]
    assert report["passed"] is False


def test_build_report_passes_without_expectations() -> None:
    report = full_report(scenario())
    assert report["expectations"] == [] and report["passed"] is True


def console_text(report: dict[str, Any]) -> str:
    console = Console(record=True, width=200)
    render_summary(report, console)
    return console.export_text()


def test_render_summary_failed() -> None:
    text = console_text(full_report())
    assert "PASS" in text and "FAIL" in text
    assert "success ratio 85% >= 80%" in text and "throughput 3.4/s < 10/s" in text
    assert text.strip().splitlines()[-1].startswith("FAILED: 1 of 3 expectations failed")
    assert "kill" in text and "a>b" in text and "w: 1.516s" in text


def test_render_summary_passed_and_none() -> None:
    sc = expect({"workload": "w", "min_success_ratio": "80%"})
    assert console_text(full_report(sc)).strip().splitlines()[-1] == ("PASSED: 1 expectations held")
    assert console_text(full_report(scenario())).strip().splitlines()[-1] == "no expectations"


def assert_png(path: Path) -> None:
    assert path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_write_report(tmp_path: Path) -> None:
    report = full_report()
    paths = write_report(report, tmp_path / "out")
    names = [p.name for p in paths]
    assert names == ["report.json", "throughput.png", "latency.png", "links.png", "metrics.png"]
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == report
    for p in paths[1:]:
        assert_png(p)


def test_write_report_without_plots(tmp_path: Path) -> None:
    assert write_report(full_report(), tmp_path, plots=False) == [tmp_path / "report.json"]
    assert not list(tmp_path.glob("*.png"))


def test_write_report_with_nothing_to_plot(tmp_path: Path) -> None:
    sc = Scenario.model_validate({"name": "empty", "nodes": {"a": {}}})
    report = build_report(sc, T0, {}, [], [], [], {})
    assert report["workloads"] == {} and report["links"] == {} and report["passed"] is True
    paths = write_report(report, tmp_path)
    assert len(paths) == 5
    for p in paths[1:]:
        assert_png(p)  # a "no data" plot


def test_importing_the_report_does_not_import_matplotlib() -> None:
    code = "import sys, apps.scenario.report; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_workload_reports_only_what_it_was_asked_to() -> None:
    from apps.scenario.summary import render_summary as render

    sc = Scenario.model_validate(
        {
            "name": "r",
            "duration": 4,
            "nodes": {"a": {}},
            "workloads": [
                {"name": "w", "node": "a", "entry": "m:f", "report": ["throughput"]},
            ],
        }
    )
    records = {"w": [{"t": 1001.5, "sent": 1001.0, "ok": True, "latency": 0.5, "bytes": 1}]}
    report = build_report(sc, 1000.0, records, [], [], [], {})
    assert report["workloads"]["w"]["reports"] == ["throughput"]
    console = Console(record=True, width=200)
    render(report, console)
    row = next(ln for ln in console.export_text().splitlines() if ln.strip().startswith("w "))
    assert "500" not in row  # the latency (500 ms) is not shown
    assert row.split()[1:5] == ["-", "-", "-", "-"]  # nor the success counts
    assert "0.25" in row  # 1 success over 4 s


def test_a_run_that_ended_early_rates_workloads_over_what_it_ran() -> None:
    sc = Scenario.model_validate(
        {
            "name": "r",
            "duration": 40,
            "stop_when_done": True,
            "nodes": {"a": {}},
            "workloads": [{"name": "w", "node": "a", "entry": "m:f"}],
        }
    )
    records = {
        "w": [{"t": 1000.0 + i, "sent": 999.5 + i, "ok": True, "latency": 0.5} for i in range(8)]
    }
    full = build_report(sc, 1000.0, records, [], [], [], {})
    early = build_report(sc, 1000.0, records, [], [], [], {}, ran_for=8.0)
    assert full["workloads"]["w"]["throughput"] == 8 / 40
    assert early["workloads"]["w"]["throughput"] == 8 / 8
    assert Scenario.model_validate({"name": "d", "nodes": {"a": {}}}).stop_when_done is False


def _large_report(n: int) -> dict[str, Any]:
    """A line of ``n`` nodes as the report has it: link i carries 1000*i bytes each way, node
    7 restarted, link 3 dropped packets."""
    links: dict[str, Any] = {}
    for i in range(1, n):
        name = f"n{i - 1}-n{i}"
        timeline = [{"t": t, f"n{i - 1}>n{i}_bytes_per_s": 10.0 * i} for t in (0.5, 1.0)]
        links[name] = {
            f"n{i - 1}>n{i}": {"bytes": 1000 * i, "packets": i, "dropped": 5 if i == 3 else 0},
            "timeline": timeline,
        }
    nodes = {
        f"n{i}": {"totals": {"n_in_interests": i}, "restarts": 1 if i == 7 else 0} for i in range(n)
    }
    return {"scenario": "line", "duration": 1.0, "links": links, "nodes": nodes}


def test_a_large_topology_shows_the_notable_and_busiest_rows_and_says_how_many_more() -> None:
    from apps.scenario import summary

    text = console_text(_large_report(100))
    # 99 link directions: the one that dropped, then the 19 busiest (n80>n81 .. n98>n99)
    assert "n2>n3" in text and "n98>n99" in text and "n80>n81" in text
    assert "n78>n79" not in text and "n1>n2" not in text
    assert (
        "... 79 more link directions (fewer bytes, none dropped; every one in report.json)" in text
    )
    # 100 nodes: the one that restarted, then the 19 with the most Interests in (n81 .. n99)
    node_rows = [ln.split()[0] for ln in text.splitlines() if ln.strip().startswith("n")]
    assert {"n7", "n81", "n99"} <= set(node_rows) and "n80" not in node_rows
    assert "... 80 more nodes (fewer Interests in, no restart; every one in report.json)" in text
    # a small topology shows every row and no such line
    small = console_text(_large_report(summary.MAX_ROWS))
    assert "more link directions" not in small and "more nodes" not in small
    assert "n0>n1" in small and "n0 " in small


def test_a_large_topology_plots_its_busiest_links(tmp_path: Path) -> None:
    from apps.scenario.plots import MAX_LINK_LINES, plot_links

    report = _large_report(100)
    plot_links(report, tmp_path / "links.png")
    assert_png(tmp_path / "links.png")
    # the title says what was left out (read back from the drawn figure)
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    original = Figure.savefig

    def keep(self: Figure, *args: Any, **kwargs: Any) -> None:
        drawn.append(self)
        original(self, *args, **kwargs)

    Figure.savefig = keep  # type: ignore[method-assign]
    try:
        plot_links(report, tmp_path / "again.png")
    finally:
        Figure.savefig = original  # type: ignore[method-assign]
    ax = drawn[0].axes[0]
    assert len(ax.get_lines()) == MAX_LINK_LINES
    assert ax.get_title() == f"link traffic (the {MAX_LINK_LINES} busiest of 99 link directions)"
    assert {ln.get_label() for ln in ax.get_lines()} == {
        f"n{i - 1}>n{i} (n{i - 1}-n{i})" for i in range(100 - MAX_LINK_LINES, 100)
    }
