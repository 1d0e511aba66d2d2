"""The shipped Grafana dashboard asks only for metrics a forwarder, an RMI server, a stream
flow or a collective member exports, with the labels they give them (scenario, node and process
come from the targets file), and Prometheus' config is valid."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import yaml
from prometheus_client import CollectorRegistry

from apps.inproc import attach_endpoint
from compute.collective.metrics import register_collective_metrics
from compute.rmi.metrics import register_rmi_metrics
from compute.rmi.stats import CallStats
from compute.stream.flow import FlowRun
from compute.stream.graph import parse_graph
from compute.stream.metrics import register_stream_metrics
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "icn-dashboard.json"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
SCRAPE_LABELS = {"scenario", "node", "kind", "process", "run", "job", "instance"}


async def exported(tmp_path: Path) -> dict[str, set[str]]:
    """Every metric family a real daemon exports, with its label names."""
    from forwarder.observe.metrics import forwarder_registry

    cfg = config_from_dict({"listen": {"unix": str(tmp_path / "f.sock")}, "log_level": "warning"})
    daemon = ForwarderDaemon(cfg)
    await daemon.start(signals=False)
    try:
        # a face, so that per-face families have samples
        _reader, writer = await asyncio.open_unix_connection(str(tmp_path / "f.sock"))
        for _ in range(200):  # the daemon accepts it on its next loop turns
            if len(daemon.faces):
                break
            await asyncio.sleep(0.005)
        daemon.counters["fw.drop_hop_limit"] += 1
        out: dict[str, set[str]] = {}
        for family in forwarder_registry(daemon).collect():
            for s in family.samples:
                out.setdefault(s.name, set()).update(s.labels)
        writer.close()
        return out
    finally:
        await daemon.stop()


class _Jobs:
    running: dict[str, object] = {}


class _RmiServer:
    """What the RMI collector reads of a server: its call stats, running jobs and counters."""

    def __init__(self) -> None:
        self.stats = CallStats()
        self.stats.finished("add", True, 0.003)
        self.stats.finished("add", False, 2.0)
        self.jobs = _Jobs()
        self.counters = {"refused_busy": 1}


def rmi_exported() -> dict[str, set[str]]:
    registry = CollectorRegistry()
    register_rmi_metrics(_RmiServer(), registry)  # type: ignore[arg-type]
    out: dict[str, set[str]] = {}
    for family in registry.collect():
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


async def stream_exported(tmp_path: Path) -> dict[str, set[str]]:
    """What a small flow (a generator into a file sink, on an in-process forwarder) exports."""
    daemon = ForwarderDaemon(config_from_dict({"listen": {}, "log_level": "warning"}))
    await daemon.start(signals=False)

    async def connect() -> Endpoint:
        return attach_endpoint(daemon)

    graph = {
        "flow": "/dash",
        "operators": [
            {"name": "gen", "type": "generator", "count": 20, "batch": 5},
            {"name": "out", "type": "file_sink", "input": "gen", "path": str(tmp_path / "o")},
        ],
    }
    run = FlowRun(parse_graph(graph), connect, state_dir=tmp_path / "state")
    registry = CollectorRegistry(auto_describe=False)
    register_stream_metrics(run, registry)
    try:
        await run.start()
        assert await run.wait(timeout=20)
        out: dict[str, set[str]] = {}
        for family in registry.collect():
            for s in family.samples:
                out.setdefault(s.name, set()).update(s.labels)
        return out
    finally:
        await run.stop()
        await daemon.stop()


class _Worker:
    """What the collective collector reads of a worker: its plan's job, name, round, counters."""

    def __init__(self) -> None:
        self.plan = SimpleNamespace(job="/ar")
        self.worker = "w0"
        self.round = 2
        self.counters: Counter[str] = Counter(chunks_published=8, interests_retransmitted=1)


def collective_exported() -> dict[str, set[str]]:
    registry = CollectorRegistry()
    member = _Worker()  # (held weakly by the collector: kept alive until the scrape is read)
    register_collective_metrics(member, registry)  # type: ignore[arg-type]
    out: dict[str, set[str]] = {}
    for family in registry.collect():
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    del member
    return out


async def test_every_query_names_an_exported_metric_and_label(tmp_path: Path) -> None:
    metrics = await exported(tmp_path) | rmi_exported() | await stream_exported(tmp_path)
    metrics |= collective_exported()
    assert "icn_collective_retries_total" in metrics
    assert "icn_stream_records_out_total" in metrics
    assert "icn_rmi_call_duration_seconds_bucket" in metrics
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        for name, labels in re.findall(r"\b(icn_[a-z_]+)(?:\{([^}]*)\})?", expr):
            assert name in metrics, f"{name} is not exported: {expr}"
            used = set(re.findall(r"(\w+)\s*=~?", labels))
            unknown = used - metrics[name] - SCRAPE_LABELS
            assert not unknown, f"{name} has no label {unknown}: {expr}"
        for by in re.findall(r"by \(([^)]*)\)", expr):
            assert {b.strip() for b in by.split(",")} <= set().union(
                *metrics.values()
            ) | SCRAPE_LABELS


def test_prometheus_config_reads_the_targets_files() -> None:
    cfg = yaml.safe_load(PROMETHEUS.read_text())
    files = cfg["scrape_configs"][0]["file_sd_configs"][0]["files"]
    assert files == ["runs/*/prometheus-targets.json"]
