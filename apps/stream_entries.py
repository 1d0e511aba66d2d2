"""Scenario entries for stream graphs: ``flow`` (a service running the operators a graph
places on its node), ``mqtt_broker`` (a mosquitto of its own), ``sensors`` (simulated sensors
publishing readings over MQTT) and ``alert_listener`` (checks the alerts a graph publishes).

``flow`` args: ``graph`` (a graph file, relative to the working directory, or the graph
inline), optionally ``node`` (default: the service's node).  Checkpoints go under the run
directory unless the graph's settings say otherwise, so a restarted service resumes.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

from apps.scenario.entry import ServiceContext, WorkloadContext
from apps.workloads import _arg
from compute.stream.flow import FlowRun
from compute.stream.graph import Graph, load_graph, parse_graph
from compute.stream.instance import Instance
from compute.stream.sources import parse_broker
from icn.endpoint import Endpoint
from icn.errors import ConfigError

METRIC_EVERY = 1.0
METRICS = (
    "records",
    "records_out",
    "interests_retransmitted",
    "losses",
    "batches_resent",
    "late_dropped",
    "fn_errors",
    "restored",
)


def _graph(args: dict[str, Any]) -> Graph:
    spec = args.get("graph")
    if isinstance(spec, str):
        graph = load_graph(Path(spec))
    elif isinstance(spec, dict):
        graph = parse_graph(spec, "args.graph")
    else:
        raise ConfigError("args.graph: give a graph file path or the graph inline (a mapping)")
    for name in graph.order:
        Instance.check(graph, name)
    return graph


async def flow(ctx: ServiceContext) -> None:
    """Run the operators placed on this node (``args.node`` or the service's)."""
    graph = _graph(ctx.args)
    node = str(ctx.args.get("node", ctx.node))
    unplaced = [name for name, op in graph.ops.items() if op.node is None]
    if unplaced:
        raise ConfigError(f"args.graph: {', '.join(unplaced)} have no node: add node: <name>")
    which = graph.instances(node)
    if not which:
        raise ConfigError(f"args.graph: no operator is placed on node {node!r}")

    async def connect() -> Endpoint:
        if ctx.connect is not None:
            return await ctx.connect()
        return await Endpoint.connect(ctx.transport)

    state_dir = None if graph.settings.state_dir else ctx.run_dir / "state" / ctx.name
    run = FlowRun(graph, connect, which, state_dir=state_dir)
    await run.start()
    for inst in run.instances:
        if inst.counters["restored"]:
            ctx.log(f"{inst.id} resumed from its checkpoint at input {inst.in_pos}")
    ctx.ready()
    try:
        while True:
            done = await run.wait(timeout=METRIC_EVERY)
            totals = run.totals()
            for name in METRICS:
                ctx.metric(f"stream_{name}", totals[name])
            if done and not run.sinks:
                break
            if done:
                await asyncio.sleep(3600)  # sinks ended: keep serving until stopped
    finally:
        await run.stop()


async def mqtt_broker(ctx: ServiceContext) -> None:
    """A mosquitto on 127.0.0.1:``args.port`` (default: a free port, logged) until stopped."""
    from apps.mqtt_broker import MosquittoBroker

    port = _arg(ctx.args, "port", 0, int)
    async with MosquittoBroker(port or None) as broker:
        ctx.log(f"mosquitto (pid {broker.pid}) on {broker.url}")
        ctx.ready()
        await asyncio.Event().wait()


async def sensors(ctx: WorkloadContext) -> None:
    """``args.sensors`` sensors (default 8) publish a JSON reading each ``1/args.rate`` s
    (default 20/s each) to ``args.topic`` (default ``sensors/{sensor}``) at QoS 1: ``{"sensor",
    "value" (Fahrenheit), "t" (ms)}``.  Sensors named in ``args.hot`` read about
    ``args.hot_celsius`` (default 40), the others ``args.celsius`` (default 20)."""
    from compute.stream.mqtt_io import MqttSink

    host, port = parse_broker(str(ctx.args.get("broker", "")), "args.broker")
    n = _arg(ctx.args, "sensors", 8, int)
    rate = _arg(ctx.args, "rate", 20.0, float)
    topic = str(ctx.args.get("topic", "sensors/{sensor}"))
    hot = {str(s) for s in ctx.args.get("hot", [])}
    cold_c = _arg(ctx.args, "celsius", 20.0, float)
    hot_c = _arg(ctx.args, "hot_celsius", 40.0, float)
    rng = random.Random(_arg(ctx.args, "seed", 1, int))
    sink = MqttSink(host, port, client_id=f"icn-{ctx.name}")
    await sink.start()
    names = [f"s{i}" for i in range(n)]
    try:
        tick = 0
        start = time.monotonic()
        while ctx.remaining > 0:
            due = start + tick / rate
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            tick += 1
            now_ms = int(time.time() * 1000)
            for name in names:
                celsius = (hot_c if name in hot else cold_c) + rng.uniform(-2.0, 2.0)
                reading = {"sensor": name, "value": celsius * 9 / 5 + 32, "t": now_ms}
                sent = time.time()
                try:
                    await sink.publish(topic.format(sensor=name), json.dumps(reading).encode())
                except Exception as exc:
                    ctx.record(False, error=str(exc))
                else:
                    ctx.record(True, time.time() - sent)
    finally:
        await sink.close()


async def alert_listener(ctx: WorkloadContext) -> None:
    """Subscribe to ``args.topic`` (default ``alerts/#``) for the workload's duration; each
    alert about a sensor in ``args.hot`` is a success, about another sensor a failure.  A hot
    sensor with no alert at all is a failure at the end.  Metrics: ``alerts``."""
    from compute.stream.mqtt_io import MqttSource

    host, port = parse_broker(str(ctx.args.get("broker", "")), "args.broker")
    hot = {str(s) for s in ctx.args.get("hot", [])}
    source = MqttSource(
        host, port, str(ctx.args.get("topic", "alerts/#")), client_id=f"icn-{ctx.name}"
    )
    await source.start()
    seen: set[str] = set()
    total = 0
    try:
        while ctx.remaining > 0:
            messages = await source.get(100, min(1.0, max(0.01, ctx.remaining)))
            for msg in messages:
                try:
                    alert = json.loads(msg.payload)["value"]
                    sensor = str(alert["sensor"])
                    latency = time.time() - alert["window_end_ms"] / 1000.0
                except (ValueError, KeyError, TypeError) as exc:
                    ctx.record(False, error=f"bad alert {msg.payload[:80]!r}: {exc}")
                    continue
                total += 1
                seen.add(sensor)
                ctx.record(sensor in hot, latency, error=None if sensor in hot else "cold")
            source.ack(messages)
            ctx.metric("alerts", total)
        for sensor in sorted(hot - seen):
            ctx.record(False, error=f"no alert for hot sensor {sensor}")
    finally:
        await source.close()
