"""The shipped iceflow-sensors scenario, run by the launcher as a user would (shorter, and on
a free port): sensors over MQTT, the graph over two nodes with a lossy link, alerts over
MQTT for the hot sensors only."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.mqtt_broker import free_port
from tests.integration.scenario.conftest import SCENARIOS, run_scenario

pytestmark = pytest.mark.slow


def test_iceflow_sensors_scenario_raises_alerts_for_the_hot_sensors_only(
    tmp_path: Path, state_dir: Path
) -> None:
    text = (SCENARIOS / "iceflow-sensors.yaml").read_text()
    port = free_port()
    assert text.count("18831") == 5
    text = text.replace("18831", str(port)).replace("duration: 20s", "duration: 16s")
    text = text.replace("duration: 18s", "duration: 14s").replace(
        "duration: 14s,", "duration: 10s,"
    )
    text = text.replace("{metric: alerts, min: 20}", "{metric: alerts, min: 12}")
    text += "trust: {}\n"  # every batch an operator reads validated (the run's CA and schema)
    path = tmp_path / "sensors.yaml"
    path.write_text(text)
    proc, report = run_scenario(path, tmp_path / "out", "--no-plots", timeout=120)
    assert report["passed"], f"{report['expectations']}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    listener = report["workloads"]["listener"]
    assert listener["ok"] == listener["requests"] >= 12  # every alert about s2 or s5
    totals = report["metrics"]["totals"]
    # the listener stops first: the last windows' alerts may be published after it left
    assert totals["stream_records_out"] >= totals["alerts"] >= 12
    assert totals["stream_fn_errors"] == 0
    # every batch read on either node was validated first, none refused
    assert totals["stream_batches_validated"] >= totals["stream_batches_in"] > 0
    assert totals["stream_batches_refused"] == 0
