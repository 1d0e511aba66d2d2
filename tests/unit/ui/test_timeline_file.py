"""timeline.json: what a finished run writes for its replay, read back the same, and a foreign or
damaged file refused with the field that is wrong; ``icn scenario view``'s and ``--ui``'s errors."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from apps.cli.scenario import scenario_app
from apps.scenario.runner import Event, RunState
from apps.scenario.schema import Scenario
from apps.scenario.ui.server import ReplaySource, timeline
from apps.scenario.ui.timeline_file import check_timeline, read_timeline, write_timeline
from icn.errors import ConfigError

T0 = 1000.0


def finished_run(tmp_path: Path) -> Any:
    """What a runner holds after a run of 3 s: samples, events, a fault, a workload's file."""
    sc = Scenario.model_validate(
        {
            "name": "rt",
            "duration": 3,
            "nodes": {"a": {}, "b": {}},
            "links": [{"between": ["a", "b"], "delay": "2ms", "rate": "10Mbit"}],
            "services": [{"name": "p", "node": "b", "entry": "m:f"}],
            "workloads": [{"name": "w", "node": "a", "entry": "m:f"}],
            "faults": [{"at": 2, "cut": ["a", "b"]}],
            "report": {"expect": [{"workload": "w", "min_success_ratio": 0.9}]},
        }
    )
    state = RunState(t0=T0, ended_at=3.0)
    for t, nbytes in ((1.0, 0), (2.0, 12_500), (3.0, 12_500)):
        state.samples.append(
            {
                "t": t,
                "nodes": {"a": {"n_in_interests": int(t)}, "b": {"n_in_interests": 0}},
                "links": {"a-b": {"a>b": {"bytes": nbytes, "packets": 10, "dropped": 0}}},
            }
        )
    state.events += [Event(None, "forwarders up"), Event(2.0, "cut a-b")]
    state.faults.append({"at": 2.0, "applied": 2.01, "action": "cut", "target": "a-b"})
    rows = [{"t": T0 + 0.5, "ok": True, "latency": 0.002}, {"t": T0 + 2.5, "ok": False}]
    (tmp_path / "w.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return SimpleNamespace(sc=sc, state=state, results_path=lambda name: tmp_path / f"{name}.jsonl")


def test_a_timeline_reads_back_as_written_and_replays_frame_by_frame(tmp_path: Path) -> None:
    report = {
        "expectations": [{"text": "w: success 50% < 90%", "passed": False}],
        "invariants": [{"text": "no loops", "passed": True}],
    }
    data = timeline(finished_run(tmp_path), None, report)
    write_timeline(data, tmp_path)
    back = read_timeline(tmp_path)
    assert back == json.loads(json.dumps(data))
    assert [f["t"] for f in back["frames"]] == [1.0, 2.0, 3.0]
    assert back["frames"][1]["links"]["a-b"]["a>b"]["bps"] == 100_000.0
    assert back["frames"][2]["links"]["a-b"]["a>b"]["bps"] == 0.0
    assert back["topology"]["links"][0]["shaping"] == "2ms 10Mbit/s"
    replay = ReplaySource(back)
    frames = replay.frames()
    # a frame shows the workload's seconds up to its time, and faults applied by then
    assert [p["t"] for p in frames[0]["workloads"]["w"]] == [0]
    assert [p["t"] for p in frames[2]["workloads"]["w"]] == [0, 2]
    assert frames[0]["faults"] == [] and frames[2]["faults"][0]["action"] == "cut"
    assert [e["text"] for e in frames[0]["events"]] == ["forwarders up"]
    assert replay.topology()["verdicts"] == [
        {"text": "w: success 50% < 90%", "passed": False},
        {"text": "no loops", "passed": True},
    ]


def good() -> dict[str, Any]:
    return {
        "version": 1,
        "topology": {
            "nodes": [{"name": "a", "pos": [0, 0]}, {"name": "b", "pos": [1, 1]}],
            "links": [{"name": "a-b", "a": "a", "b": "b"}],
        },
        "frames": [{"t": 1.0}],
    }


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(version=7), "version 7"),
        (lambda d: d.pop("topology"), "topology:"),
        (lambda d: d["topology"]["nodes"][1].pop("pos"), "topology.nodes[1].pos"),
        (lambda d: d["topology"]["links"][0].update(b="zz"), "topology.links[0]"),
        (lambda d: d.update(frames={}), "frames:"),
        (lambda d: d["frames"].append({"time": 2}), "frames[1]"),
    ],
)
def test_a_foreign_timeline_is_refused_naming_its_field(change: Any, field: str) -> None:
    assert check_timeline(good()) is None
    data = good()
    change(data)
    problem = check_timeline(data)
    assert problem is not None and field in problem
    assert check_timeline([1, 2]) is not None


def test_read_timeline_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        read_timeline(tmp_path / "nope")
    with pytest.raises(ConfigError, match="output directory of a run"):
        read_timeline(tmp_path)
    (tmp_path / "timeline.json").write_text('{"version": 1, "topo')
    with pytest.raises(ConfigError, match=r"not JSON.*cut short"):
        read_timeline(tmp_path)


def test_view_errors_exit_2_with_a_message(tmp_path: Path) -> None:
    cli = CliRunner()
    missing = cli.invoke(scenario_app, ["view", str(tmp_path)])
    assert missing.exit_code == 2 and "timeline.json" in missing.stderr
    (tmp_path / "timeline.json").write_text(json.dumps({**good(), "version": 9}))
    foreign = cli.invoke(scenario_app, ["view", str(tmp_path)])
    assert foreign.exit_code == 2 and "version 9" in foreign.stderr
    assert "Traceback" not in foreign.output
    write_timeline(good(), tmp_path)
    bad_ui = cli.invoke(scenario_app, ["view", str(tmp_path), "--ui", "localhost:80"])
    assert bad_ui.exit_code == 2
    assert "--ui 'localhost:80'" in bad_ui.stderr and "--ui 8080" in bad_ui.stderr


def test_run_refuses_a_bad_ui_address_before_starting_anything(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "name: s\nduration: 1s\nnodes: {a: {}}\nlinks: []\n"
        "workloads: [{name: w, node: a, entry: 'apps.workloads:consumer'}]\n"
    )
    out = tmp_path / "out"
    ran = CliRunner().invoke(
        scenario_app, ["run", str(tmp_path / "s.yaml"), "--out", str(out), "--ui", "1.2.3:x"]
    )
    assert ran.exit_code == 2 and "--ui" in ran.stderr
    assert "backend" not in ran.stdout  # no runner was made: nothing started
    assert not out.exists()
