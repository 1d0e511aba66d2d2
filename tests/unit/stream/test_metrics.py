"""Stream operator metrics: a small flow on an in-process forwarder, scraped over HTTP on
loopback; `icn flow run --metrics`."""

from __future__ import annotations

import asyncio
import json
import math
import socket
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from apps.cli.flow import flow_app
from apps.inproc import attach_endpoint
from compute.stream.flow import FlowRun
from compute.stream.graph import parse_graph
from compute.stream.metrics import register_stream_metrics
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint
from icn.observe.endpoint import serve_metrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(port: int) -> Samples:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def spec(workdir: Path) -> dict[str, Any]:
    # event times 0..2500 ms in order, then one at 50 ms: its 1 s window closed at 2500
    times = [*range(0, 2600, 100), 50]
    src = workdir / "in.jsonl"
    src.write_text("".join(json.dumps({"t": t, "k": "a"}) + "\n" for t in times))
    return {
        "flow": "/m",
        "operators": [
            {"name": "src", "type": "file_source", "path": str(src), "time_field": "t",
             "key_field": "k", "batch": 5},
            {"name": "win", "type": "window", "input": "src", "tumbling": "1s",
             "aggregate": "count"},
            {"name": "out", "type": "file_sink", "input": "win", "path": str(workdir / "o")},
        ],
    }  # fmt: skip


async def test_a_flow_scraped_counts_records_late_records_and_watermarks(workdir: Path) -> None:
    daemon = ForwarderDaemon(config_from_dict({"listen": {}}))
    await daemon.start()

    async def connect() -> Endpoint:
        return attach_endpoint(daemon)

    run = FlowRun(parse_graph(spec(workdir)), connect, state_dir=workdir / "state")
    registry = CollectorRegistry(auto_describe=False)
    register_stream_metrics(run, registry)
    endpoint = await serve_metrics("127.0.0.1:0", registry)
    try:
        before = await scrape(endpoint.port)  # no instance yet: no operator sample
        assert not [k for k in before if k[0].startswith("icn_stream_records")]
        await run.start()
        assert await run.wait(timeout=20)
        after = await scrape(endpoint.port)
        win = next(i for i in run.instances if i.name == "win")
        win.watermark = 1500  # what a scrape mid-run reads: ms of event time, in seconds
        mid = await scrape(endpoint.port)
    finally:
        await endpoint.close()
        await run.stop()
        await daemon.stop()

    def v(name: str, op: str, **extra: str) -> float:
        return value(after, name, operator=op, partition="0", **extra)

    assert v("icn_stream_records_in_total", "src") == 27
    assert v("icn_stream_records_out_total", "src") == 27
    assert v("icn_stream_records_in_total", "win") == 27
    assert v("icn_stream_late_records_total", "win", outcome="dropped") == 1
    assert v("icn_stream_late_records_total", "src", outcome="dropped") == 0
    windows = len((workdir / "o").read_text().splitlines())
    assert v("icn_stream_records_out_total", "win") == windows == 3  # [0,1) [1,2) [2,3) s
    assert v("icn_stream_records_in_total", "out") == v("icn_stream_records_out_total", "out") == 3
    assert v("icn_stream_batches_in_total", "win") == win.counters["batches_in"] > 0
    assert v("icn_stream_checkpoints_total", "win") == win.counters["checkpoints"]
    assert math.isinf(v("icn_stream_watermark_seconds", "win"))  # the stream ended
    assert v("icn_stream_instance_done", "out") == 1
    assert value(mid, "icn_stream_watermark_seconds", operator="win", partition="0") == 1.5
    info = value(after, "icn_stream_operator_info", operator="win", partition="0", flow="/m",
                 kind="WindowOp")  # fmt: skip
    assert info == 1
    # every label is an operator, a partition, an outcome or a counter name: never a record key
    keys = {k for _, labels in after for k, val in labels if val == "a"}
    assert not keys


def test_flow_run_metrics_flag_serves_and_refuses_a_bad_address(workdir: Path) -> None:
    graph = workdir / "g.yaml"
    graph.write_text(json.dumps(spec(workdir)))  # YAML reads JSON
    runner = CliRunner()
    args = ["run", str(graph), "--state-dir", str(workdir / "s"), "--quiet", "--timeout", "20s"]
    ok = runner.invoke(flow_app, [*args, "--metrics", "127.0.0.1:0"])
    assert ok.exit_code == 0, ok.output
    assert "metrics on http://127.0.0.1:" in ok.output

    bad = runner.invoke(flow_app, [*args, "--metrics", "127.0.0.1"])
    assert bad.exit_code == 2 and "error: --metrics" in bad.output and "HOST:PORT" in bad.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = runner.invoke(flow_app, [*args, "--metrics", f"127.0.0.1:{port}"])
    assert busy.exit_code == 2 and "error: --metrics" in busy.output, busy.output
    assert "Traceback" not in bad.output + busy.output
