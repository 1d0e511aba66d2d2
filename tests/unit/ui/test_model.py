"""The live page's numbers: link rates from two samples, workloads per second, frames."""

from __future__ import annotations

from apps.scenario.ui.model import WorkloadSeries, frame, link_rates, shaping_text


def sample(t: float, ab: int, ba: int, dropped: int = 0) -> dict[str, object]:
    return {
        "t": t,
        "nodes": {"a": {"n_in_interests": int(t * 10), "fw.cs_hit": 3}, "b": None},
        "links": {
            "a-b": {
                "a>b": {"bytes": ab, "packets": ab // 100, "dropped": dropped},
                "b>a": {"bytes": ba, "packets": ba // 1000, "dropped": 0},
            }
        },
    }


def test_rates_are_differences_over_the_interval() -> None:
    rates = link_rates(sample(1.0, 1000, 10_000), sample(1.5, 2000, 30_000, dropped=4))
    assert rates["a-b"]["a>b"] == {"bps": 16_000.0, "pps": 20.0, "dropped": 4.0}
    assert rates["a-b"]["b>a"]["bps"] == 320_000.0
    assert link_rates(None, sample(1.0, 5, 5))["a-b"]["a>b"]["bps"] == 0.0


def test_a_restarted_node_counts_from_zero_not_negative() -> None:
    rates = link_rates(sample(1.0, 50_000, 0), sample(2.0, 1000, 0))
    assert rates["a-b"]["a>b"]["bps"] == 8000.0


def test_workload_series_per_second_with_quantiles() -> None:
    s = WorkloadSeries()
    t0 = 100.0
    rows = [{"t": t0 + 0.1 + i / 100, "ok": True, "latency": 0.001 * (i + 1)} for i in range(90)]
    rows += [{"t": t0 + 1.2, "ok": False}, {"t": t0 + 1.3, "metric": "x", "value": 1}]
    s.add(rows, t0)
    points = s.points()
    assert [p["t"] for p in points] == [0, 1]
    assert points[0]["ok"] == 90 and points[0]["p50_ms"] == 46.0 and points[0]["p99_ms"] == 90.0
    assert points[1] == {"t": 1, "ok": 0, "failed": 1, "p50_ms": None, "p99_ms": None}
    # a second still going is left out: it would draw as a drop
    assert s.points(upto=0.5) == [] and [p["t"] for p in s.points(upto=1.0)] == [0]


def test_frame_keeps_node_counters_and_events_up_to_its_time() -> None:
    samples = [sample(1.0, 0, 0), sample(2.0, 800, 0)]
    events = [{"t": None, "text": "setup"}, {"t": 1.5, "text": "x"}, {"t": 2.5, "text": "later"}]
    f = frame(samples, 1, {}, events, [{"at": 1.8, "applied": 1.9}, {"at": 3.0, "applied": None}])
    assert f["nodes"]["b"] is None and f["nodes"]["a"]["n_in_interests"] == 20
    assert [e["text"] for e in f["events"]] == ["setup", "x"]
    assert len(f["faults"]) == 1
    assert f["links"]["a-b"]["a>b"]["bps"] == 6400.0


def test_shaping_text() -> None:
    assert shaping_text(0.01, 0.002, 0.01, 10e6) == "10ms±2ms 1% loss 10Mbit/s"
    assert shaping_text(0, 0, 0, None) == "unshaped"
