"""A scenario with ``capture:`` and ``metrics:``: every forwarder's /metrics answers at the
address the targets file gives while the run lasts (and each service's and workload's, a stream
flow's and collective members' with their own families), the chosen node's capture holds the
workload's Interests, and report.json has the per-face tables (satisfied and timed-out
Interests included), the content store's and the per-request one."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from apps.procs import ProcessGroup, icn_argv
from tests.needs import is_root_with, needs

SCENARIO = """
name: observed
duration: 5s
nodes: {a: {}, b: {}}
links:
  - {between: [a, b], delay: 20ms}
capture: {nodes: [a]}
metrics: {port: 9461}
services:
  - name: producer
    node: b
    entry: apps.workloads:producer
    announce: [/obs/data]
    args: {prefix: /obs/data, size: 512}
  - name: flow
    node: b
    entry: apps.stream_entries:flow
    announce: [/obs/stream/gen]
    args:
      graph:
        flow: /obs/stream
        operators:
          - {name: gen, type: generator, node: b, count: 100, rate: 50, batch: 10}
          - {name: out, type: file_sink, node: b, input: gen, path: "{run_dir}/gen.jsonl"}
  - name: agg
    node: b
    entry: apps.collective_entries:aggregator
    announce: [/obs/ar/sum]
    args: &job {job: /obs/ar, workers: {w0: a, w1: b}, aggregators: [b]}
workloads:
  - {name: w0, node: a, entry: apps.collective_entries:worker, start: 0.5s,
     announce: [/obs/ar/w/w0],
     args: {<<: *job, worker: w0, rounds: 3, every: 1s, size: 64KiB}}
  - {name: w1, node: b, entry: apps.collective_entries:worker, start: 0.5s,
     announce: [/obs/ar/w/w1],
     args: {<<: *job, worker: w1, rounds: 3, every: 1s, size: 64KiB}}
  - name: consumer
    node: a
    entry: apps.workloads:consumer
    start: 0.5s
    duration: 3.5s
    args: {prefix: /obs/data, rate: 50}
  - name: impatient  # gives up before the Data can be back: a's PIT entries expire
    node: a
    entry: apps.workloads:consumer
    start: 0.5s
    # as long as the consumer: the test scrapes every process's /metrics once all nine are
    # listed, which a loaded machine once reached after this one (then 2 s) had ended
    duration: 3.5s
    args: {prefix: /obs/data/late, rate: 20, lifetime: 10ms, retries: 0}  # none cached
"""


def scrape(target: str) -> str:
    with urllib.request.urlopen(f"http://{target}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


@pytest.mark.slow
def test_targets_scraped_capture_written_and_tables_in_the_report(tmp_path: Path) -> None:
    (tmp_path / "obs.yaml").write_text(SCENARIO)
    out = tmp_path / "out"
    argv = icn_argv("scenario", "run", str(tmp_path / "obs.yaml"), "--out", str(out), "--no-plots")
    with ProcessGroup(tmp_path) as group:
        run = group.start("run", argv, env={"COLUMNS": "200"})
        run.wait_for("workload consumer started", timeout=30, stream="stdout")
        targets: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10  # the workload's process says its port as it starts
        while time.monotonic() < deadline and len(targets) < 9:
            with contextlib.suppress(FileNotFoundError, ValueError):
                targets = json.loads((out / "prometheus-targets.json").read_text())
            time.sleep(0.1)
        kinds = sorted((t["labels"]["kind"], t["labels"]["process"]) for t in targets)
        assert kinds == [
            ("forwarder", "a"),
            ("forwarder", "b"),
            ("service", "agg"),
            ("service", "flow"),
            ("service", "producer"),
            ("workload", "consumer"),
            ("workload", "impatient"),
            ("workload", "w0"),
            ("workload", "w1"),
        ]
        for t in targets:  # each process' own /metrics, at the port it bound
            if t["labels"]["kind"] != "forwarder":
                assert "icn_process_cpu_seconds_total" in scrape(t["targets"][0])
        # the stream service's operators and the collective members are in their own /metrics
        at = {t["labels"]["process"]: t["targets"][0] for t in targets}
        assert 'icn_stream_records_out_total{operator="gen"' in scrape(at["flow"])
        assert 'icn_collective_rounds_total{job="/obs/ar",member="w0"' in scrape(at["w0"])
        assert 'icn_collective_rounds_total{job="/obs/ar",member="b"' in scrape(at["agg"])
        targets = [t for t in targets if t["labels"]["kind"] == "forwarder"]
        scraped: dict[str, float] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(scraped) < 2:
            for t in targets:
                text = scrape(t["targets"][0])
                m = re.search(r'^icn_interests_total\{direction="in"\} (\S+)$', text, re.M)
                if m and float(m.group(1)) > 0:
                    scraped[t["labels"]["node"]] = float(m.group(1))
            time.sleep(0.2)
        assert set(scraped) == {"a", "b"}, scraped
        assert run.wait(60) == 0, run.output()[-3000:]
    assert not (out / "pcap" / "b.pcapng").exists()
    lines = subprocess.run(
        icn_argv("pcap", str(out / "pcap" / "a.pcapng")),
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert sum(" INTEREST /obs/data/" in ln for ln in lines) >= 100
    report = json.loads((out / "report.json").read_text())
    rows = report["tracers"]["faces"]["interval_rows"]
    # a's face towards b carried the consumer's Interests out, the Data in
    busy = [
        r for r in rows
        if r["node"] == "a" and r["counts"]["out_interests"] > 0 and r["counts"]["in_data"] > 0
    ]  # fmt: skip
    assert busy, rows[:5]
    assert all(r["rates"]["out_interests"] > 0 for r in busy)
    # per face outcomes: b answered a's Interests (satisfied on b's face towards a); the
    # impatient consumer's Interests expired in a's PIT (timed out on its app face there)
    assert any(r["node"] == "b" and r["counts"]["satisfied_interests"] > 0 for r in rows)
    # (an entry is matched until the expiry timer takes it, so some late Data still satisfies)
    timed_out = sum(r["counts"]["timed_out_interests"] for r in rows if r["node"] == "a")
    assert 0 < timed_out <= report["nodes"]["a"]["totals"]["pit.expired"], rows
    assert not [k for k in report["nodes"]["a"]["counters"] if k.startswith("face_timed_out.")]
    cs = report["tracers"]["cs"]
    assert {r["node"] for r in cs} == {"a", "b"}
    assert report["tracers"]["faces"]["left_out"] == 0
    requests = report["tracers"]["app_delays"]["request_rows"]
    lost = [r for r in requests if r["workload"] == "impatient"]
    assert lost and all(r["error"] == "timeout" and r["retx"] == 0 for r in lost)
    requests = [r for r in requests if r["workload"] == "consumer"]
    assert len(requests) == report["workloads"]["consumer"]["requests"] >= 100
    answered = [r for r in requests if r["ok"]]
    assert answered and all(r["retx"] is not None for r in requests)
    assert all(0 < r["last_delay_ms"] <= r["full_delay_ms"] for r in answered)


NETNS = """
name: observed-ns
duration: 4s
nodes: {a: {}, b: {}}
links: [{between: [a, b], delay: 1ms}]
capture: {nodes: [b]}
metrics: {port: 9400}
services:
  - {name: producer, node: b, entry: apps.workloads:producer, announce: [/ns/data],
     args: {prefix: /ns/data}}
workloads:
  - {name: consumer, node: a, entry: apps.workloads:consumer, start: 0.5s, duration: 3s,
     args: {prefix: /ns/data, rate: 20}}
"""


@pytest.mark.slow
@needs(is_root_with("ip"), "the netns backend needs root and iproute2 (CI has both)")
def test_netns_targets_reach_into_the_namespaces(tmp_path: Path) -> None:
    # each process serves /metrics inside its node's namespace, which no route reaches from
    # here: the targets file gives the launcher's relays on loopback instead
    (tmp_path / "ns.yaml").write_text(NETNS)
    out = tmp_path / "out"
    argv = icn_argv(
        "scenario", "run", str(tmp_path / "ns.yaml"), "--out", str(out), "--no-plots",
        "--backend", "netns",
    )  # fmt: skip
    with ProcessGroup(tmp_path) as group:
        run = group.start("run", argv, env={"COLUMNS": "200"})
        run.wait_for("workload consumer started", timeout=30, stream="stdout")
        targets: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(targets) < 4:
            with contextlib.suppress(FileNotFoundError, ValueError):
                targets = json.loads((out / "prometheus-targets.json").read_text())
            time.sleep(0.1)
        at = {t["labels"]["process"]: t["targets"][0] for t in targets}
        assert sorted(at) == ["a", "b", "consumer", "producer"]
        assert all(t.startswith("127.0.0.1:") for t in at.values()), at
        assert len(set(at.values())) == 4  # the forwarders' one port: a relay each
        for name in ("a", "b"):
            assert re.search(r"^icn_uptime_seconds \S+$", scrape(at[name]), re.M), name
        assert "icn_process_cpu_seconds_total" in scrape(at["consumer"])
        assert run.wait(60) == 0, run.output()[-3000:]
    assert (out / "pcap" / "b.pcapng").stat().st_size > 0
