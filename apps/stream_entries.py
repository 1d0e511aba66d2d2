"""Scenario entries for stream graphs: ``flow`` (a service running the operators a graph
places on its node), ``mqtt_broker`` (a mosquitto of its own), ``sensors`` (simulated sensors
publishing readings over MQTT), ``alert_listener`` (checks the alerts a graph publishes) and
``window_check`` (checks a file sink's windows against the generator's input).

``flow`` args: ``graph`` (a graph file, relative to the working directory, or the graph
inline), optionally ``node`` (default: the service's node).  Checkpoints go under the run
directory unless the graph's settings say otherwise, so a restarted service resumes; a file
source's or sink's ``path`` may start with ``{run_dir}``, the run directory.

``window_check`` (a workload) checks that a graph's windows hold every record exactly once.
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
from compute.stream.graph import (
    FileSink,
    FileSource,
    GeneratorSource,
    Graph,
    KeyByOp,
    WindowOp,
    load_graph,
    parse_graph,
)
from compute.stream.instance import Instance
from compute.stream.sources import parse_broker
from icn.dataplane.endpoint import Endpoint
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


RUN_DIR = "{run_dir}"  # in a file source's or sink's path: the scenario run's directory


def _graph(args: dict[str, Any], run_dir: Path) -> Graph:
    spec = args.get("graph")
    if isinstance(spec, str):
        graph = load_graph(Path(spec))
    elif isinstance(spec, dict):
        graph = parse_graph(spec, "args.graph")
    else:
        raise ConfigError("args.graph: give a graph file path or the graph inline (a mapping)")
    for op in graph.ops.values():
        if isinstance(op, FileSink | FileSource):
            op.path = op.path.replace(RUN_DIR, str(run_dir))
    for name in graph.order:
        Instance.check(graph, name)
    return graph


async def flow(ctx: ServiceContext) -> None:
    """Run the operators placed on this node (``args.node`` or the service's)."""
    graph = _graph(ctx.args, ctx.run_dir)
    node = str(ctx.args.get("node", ctx.node))
    unplaced = [name for name, op in graph.ops.items() if op.node is None]
    if unplaced:
        raise ConfigError(f"args.graph: {', '.join(unplaced)} have no node: add node: <name>")
    which = graph.instances(node)
    if not which:
        raise ConfigError(f"args.graph: no operator is placed on node {node!r}")

    # a trust block: the process's endpoint serves its certificate, each operator's endpoint
    # signs its batches with it, and every inlet validates what it reads
    signer = ctx.signer()
    if signer is not None:
        await ctx.endpoint()

    async def connect() -> Endpoint:
        if ctx.connect is not None:
            ep = await ctx.connect()
        else:
            ep = await Endpoint.connect(ctx.transport)
        if signer is not None:
            ep.signer = signer
        return ep

    state_dir = None if graph.settings.state_dir else ctx.run_dir / "state" / ctx.name
    validator = await ctx.validator()
    run = FlowRun(graph, connect, which, state_dir=state_dir, validator=validator)
    if ctx.metrics_registry is not None:  # a scenario's metrics: each operator instance's
        from compute.stream.metrics import register_stream_metrics

        register_stream_metrics(run, ctx.metrics_registry)
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
            if validator is not None:  # batches validated at the inlets here, and refused
                ctx.metric("stream_batches_in", totals["batches_in"])
                ctx.metric("stream_batches_validated", validator.counters["trust.ok"])
                ctx.metric("stream_batches_refused", totals["batches_refused"])
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


EXACTLY_ONCE = "exactly_once_per_window"  # the invariant each window of window_check checks
CHECK_EVERY = 2.0  # seconds between two reads of the sink's files


def _only(graph: Graph, kind: type, name: object, what: str) -> Any:
    """The operator ``name`` (of type ``kind``), or the graph's only one of that type."""
    ops: list[Any] = [op for op in graph.ops.values() if isinstance(op, kind)]
    if name is not None:
        ops = [op for op in ops if op.name == name]
        if not ops:
            raise SystemExit(f"args.{what}: the graph has no {what} operator named {name!r}")
    if len(ops) != 1:
        names = ", ".join(op.name for op in ops) or "none"
        raise SystemExit(f"args.{what}: name the {what} operator to check ({names})")
    return ops[0]


def window_reference(
    gen: GeneratorSource, key_field: str, size_ms: int
) -> dict[tuple[Any, int], list[int]]:
    """(key, window start) -> the record numbers the window must hold, from the generator's
    deterministic input (its ``fn`` gives each record's key)."""
    from compute.stream.operators import load_fn

    if gen.count is None or gen.fn is None:
        raise SystemExit(
            f"args.graph: generator {gen.name} needs count: N and fn: (records that carry their "
            "number, e.g. apps.demos.stream_demo:numbered) to be checked"
        )
    fn = load_fn(gen.fn, f"{gen.name}.fn")
    out: dict[tuple[Any, int], list[int]] = {}
    for i in range(gen.count):
        t = gen.start + int(i * 1000 / gen.events_per_second)
        out.setdefault((fn(i)[key_field], t - t % size_ms), []).append(i)
    return out


def read_windows(paths: list[Path]) -> dict[tuple[Any, int], list[list[int]]]:
    """(key, window start) -> the record numbers of each time the sink wrote that window."""
    seen: dict[tuple[Any, int], list[list[int]]] = {}
    for path in paths:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                win = json.loads(line)["value"]
                key = (win["key"], int(win["start"]))
                ids = [int(i) for i in win["value"]]
            except (ValueError, KeyError, TypeError):
                continue  # a line being written
            seen.setdefault(key, []).append(ids)
    return seen


def judge_window(expected: list[int] | None, written: list[list[int]]) -> tuple[bool, str]:
    """Whether a window holds every record of its reference exactly once, and the outcome."""
    if expected is None:
        return False, "unexpected window"
    if not written:
        return False, "missing window"
    if len(written) > 1:
        return False, "window written more than once"
    got = written[0]
    if sorted(got) == sorted(expected):
        return True, "exactly once"
    if len(set(got)) < len(got):
        return False, "records repeated"
    if set(got) - set(expected):
        return False, "records from another window"
    return False, "records missing"


async def window_check(ctx: WorkloadContext) -> None:
    """Check the output of a graph's file sink against the generator's input: every window of
    the reference once, holding each of its records once (invariant
    ``exactly_once_per_window``, one check per window), at the end of the workload or as soon
    as every window was written.

    ``args.graph`` is the graph (as for ``flow``), with a generator whose ``fn`` gives records
    carrying their number (``apps.demos.stream_demo:numbered``), a key_by on a field, a tumbling
    window reducing the numbers (``aggregate: reduce``, ``reduce: apps.demos.stream_demo:concat``,
    ``field: ids``) and a file sink; ``args.generator``, ``args.key_by``, ``args.window`` and
    ``args.sink`` name them when the graph has several.  Metrics: ``windows_expected``,
    ``windows_written``."""
    graph = _graph(ctx.args, ctx.run_dir)
    gen = _only(graph, GeneratorSource, ctx.args.get("generator"), "generator")
    key_by = _only(graph, KeyByOp, ctx.args.get("key_by"), "key_by")
    window = _only(graph, WindowOp, ctx.args.get("window"), "window")
    sink = _only(graph, FileSink, ctx.args.get("sink"), "sink")
    size_ms, slide_ms = window.size_slide_ms()
    if key_by.field is None or size_ms != slide_ms:
        raise SystemExit("args.graph: checked are a key_by on a field and a tumbling window")
    reference = window_reference(gen, key_by.field, size_ms)
    paths = [
        Path(sink.path.replace("{partition}", str(p))) for p in range(graph.partitions[sink.name])
    ]
    ctx.metric("windows_expected", len(reference))
    started = time.time()
    seen: dict[tuple[Any, int], list[list[int]]] = {}
    while ctx.remaining > CHECK_EVERY:
        seen = await asyncio.to_thread(read_windows, paths)
        ctx.metric("windows_written", len(seen))
        if set(reference) <= set(seen):
            await asyncio.sleep(CHECK_EVERY)  # one more read: the last batch fully written
            seen = await asyncio.to_thread(read_windows, paths)
            break
        await asyncio.sleep(CHECK_EVERY)
    else:
        seen = await asyncio.to_thread(read_windows, paths)
    ctx.metric("windows_written", len(seen))
    for key in sorted({*reference, *seen}, key=lambda k: (k[1], str(k[0]))):
        held, outcome = judge_window(reference.get(key), seen.get(key, []))
        detail = None if held else f"key {key[0]} window {key[1]} ms"
        ctx.check(EXACTLY_ONCE, held, outcome, detail)
        ctx.record(held, sent=started, error=None if held else outcome)
    ctx.log(f"{len(seen)} of {len(reference)} windows written; checked")
