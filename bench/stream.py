"""Stream operator graph (compute/stream) against bytewax and a plain asyncio pipeline, same run.

One pipeline, four implementations (ours in four forms), the same input:
  source -> map (apps.demos.stream_demo:scale) -> key by sensor -> 1 s tumbling event-time window,
  mean of value -> sink
Record i is {"sensor": f"s{i % keys}", "value": ((i * 2654435761) % 1000) / 10.0} at event time
int(i * 1000 / events_per_second) ms (the generator's built-in record; 1,000,000 records at
100,000 events/s are 10 windows per key).
  ours:         compute/stream's runtime in this process: every operator an instance on its own
                endpoint of one in-process forwarder (in-memory faces), batches of 1024 records
                as msgpack Data of up to 256 KiB, pulled by windows of Interests
  ours-procs:   the same graph, one `icn flow run --only <op>` process per operator and a
                forwarder process, over its Unix socket
  bytewax:      bytewax (pip install -e '.[bench]'): input -> map -> key_on -> fold_window
                (EventClock, TumblingWindower aligned to the epoch) -> output, run_main (one
                worker) in this process; its source a DynamicSource, worker w of W making the
                records of the keys k with k % W == w, in record order
  bytewax-procs: the same dataflow on a cluster of --bytewax-procs processes (default: this
                machine's cores, as many as ours' processes share) of one worker each
                (cluster_main, as `python -m bytewax.testing -p N -w 1` starts them), every
                worker making its share of the records.  bytewax 0.21.1 runs workers as
                threads of a process (-w) or as processes (-p): processes, as its Python steps
                hold the GIL, so threads of one process do not run them in parallel
  asyncio:      four coroutines (source, map, window, sink) joined by asyncio.Queue(maxsize=64)
                of 1024-record batches, the window written plainly (no lateness, no checkpoints)
Every source makes its records with make_record() below, which notes the wall time it made
each key's first record and the last record of each key in each window.  Every sink notes the
wall time each window result reached it.  records/s: records / (last result received - first
record made, by any source).  Latency of a window result: received - its last record made;
p50 and p99 over all results.  CPU: process CPU seconds of the run (bytewax: all its threads;
bytewax-procs: every process's from its run's start; ours-procs: every operator process from
the import of its functions, plus the forwarder from ready to the end).
Every implementation's results must equal a reference computed here (group by window and key,
sum in arrival order, then / count), bit for bit; a difference fails the benchmark.
Ratios are ours / peer: above 1 favours ours for records/s, below 1 for latency and CPU.

The headline lines set ours with a process per operator against bytewax-procs (one worker
where only bytewax ran): first columnar (ours' vectorized map: "ours-procs-vec/bytewax-procs
..."), then, the last line, like for like (both record by record, on the same cores:
"ours-procs/bytewax-procs records/s: X, p50: Y, CPU: Z (like for like: ...)").  Where bytewax
ran faster on one worker than on its processes, a note before them gives ours' records/s
against that too.

Run: .venv/bin/python bench/stream.py [--records 1000000] [--keys 100]
     [--events-per-second 100000] [--repeat 1] [--bytewax-procs N]
     [--only ours,ours-vec,ours-procs,ours-procs-vec,bytewax,bytewax-procs,asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import importlib
import importlib.metadata
import json
import logging
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from apps.demos.stream_demo import scale  # noqa: E402
from bench import loops  # noqa: E402

IMPLS = ("ours", "ours-vec", "ours-procs", "ours-procs-vec", "bytewax", "bytewax-procs", "asyncio")
OURS = ("ours", "ours-vec", "ours-procs", "ours-procs-vec")
PEERS = ("bytewax", "bytewax-procs", "asyncio")
SETTINGS: dict[str, Any] = {"window": 4, "buffer": 2, "lead": 0.05}  # ours'; --window...
# the headline lines: ours with a process per operator against bytewax on as many processes
# as there are cores, columnar (ours' vectorized map) and like for like (both record by record,
# the last line)
HEADLINES = (
    ("columnar", "ours-procs-vec", "one process per operator, vectorized map"),
    ("like for like", "ours-procs", "record by record, one process per operator"),
)
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
BYTEWAX_PROCS = [CORES]  # bytewax-procs' processes; --bytewax-procs
LOOPS: set[str] = set()  # the event loops the in-process runs ran on, as seen in them
PROC_LOOPS: set[str] = set()  # ours-procs' processes' loops, from what they loaded
BATCH = 1024  # records per source batch, in every implementation
QUEUE = 64  # batches a queue of the asyncio pipeline holds
SIZE_MS = 1000  # the tumbling window
SPEC_ENV, OUT_ENV = "BENCH_STREAM_SPEC", "BENCH_STREAM_OUT"  # set for ours-procs' children
LINGER = 3.0  # seconds an operator process may take to end after the sink
INTERRUPTED = 130  # icn flow run's exit code after SIGTERM
NO_BYTEWAX = "bytewax: not installed (pip install -e '.[bench]')"


class BenchError(Exception):
    """A run failed, timed out or returned wrong results: the benchmark stops here."""


@dataclass(frozen=True)
class Spec:
    records: int
    keys: int
    eps: float  # events per second of event time

    def t_of(self, i: int) -> int:
        return int(i * 1000 / self.eps)  # as compute/stream/sources.py's generator

    def env(self) -> str:
        return f"{self.records},{self.keys},{self.eps!r}"

    @classmethod
    def from_env(cls, text: str) -> Spec:
        n, k, eps = text.split(",")
        return cls(int(n), int(k), float(eps))


# ---- what sources and sinks note (module globals: ours calls them by module:function) --------

KEYS = 1
# records whose making is timed: each key's first (record 0 and the first record any source
# partition makes), the last of each key in each window
TIMED: set[int] = set()
MADE: dict[int, float] = {}  # record -> wall time it was made
RECEIVED: list[tuple[int, str, float, float]] = []  # (window start, key, mean, wall time)
_CPU_FROM = [time.process_time()]  # a child's CPU counts from its import of this module


def value_of(i: int, keys: int) -> dict[str, Any]:
    return {"sensor": f"s{i % keys}", "value": ((i * 2654435761) % 1000) / 10.0}


def make_record(i: int) -> dict[str, Any]:
    """Record ``i`` (the generator's ``fn``; bytewax's and asyncio's sources call it too)."""
    if i in TIMED:
        MADE[i] = time.time()
    return {"sensor": f"s{i % KEYS}", "value": ((i * 2654435761) % 1000) / 10.0}


def stamp(window: dict[str, Any]) -> dict[str, Any]:
    """Ours: a map right after the window notes each result as it arrives."""
    RECEIVED.append((window["start"], window["key"], window["value"], time.time()))
    return window


def last_records(spec: Spec) -> dict[tuple[int, str], int]:
    """(window start, key) -> the record that completes that key's window (its last one)."""
    out: dict[tuple[int, str], int] = {}
    idx = range(spec.records)
    lo = 0
    for start in range(0, spec.t_of(spec.records - 1) + 1, SIZE_MS):
        hi = bisect_left(idx, start + SIZE_MS, key=spec.t_of)  # first record of later windows
        for j in range(max(lo, hi - spec.keys), hi):  # the last `keys` are each key's last
            out[(start, f"s{j % spec.keys}")] = j
        lo = hi
    return out


def prepare(spec: Spec) -> dict[tuple[int, str], int]:
    """Empties the tables for a run; returns :func:`last_records`."""
    global KEYS
    KEYS = spec.keys
    last = last_records(spec)
    TIMED.clear()
    TIMED.update({*range(min(spec.records, spec.keys)), *last.values()})
    MADE.clear()
    RECEIVED.clear()
    return last


def _dump() -> None:
    """ours-procs' children: what this process noted, for the parent."""
    out = {
        "cpu": time.process_time() - _CPU_FROM[0],
        "made": MADE,
        "received": RECEIVED,
    }
    Path(f"{os.environ[OUT_ENV]}.{os.getpid()}.json").write_text(json.dumps(out))


if os.environ.get(SPEC_ENV) and os.environ.get(OUT_ENV):
    prepare(Spec.from_env(os.environ[SPEC_ENV]))
    atexit.register(_dump)


# ---- the reference and the checks ----------------------------------------------------------


def reference(spec: Spec) -> dict[tuple[int, str], float]:
    """Mean of the scaled values per (window start, key), summed in arrival order."""
    sums: dict[tuple[int, str], list[Any]] = {}
    for i in range(spec.records):
        v = scale(value_of(i, spec.keys))
        t = spec.t_of(i)
        slot = (t - t % SIZE_MS, v["sensor"])
        acc = sums.get(slot)
        if acc is None:
            sums[slot] = [0 + v["value"], 1]
        else:
            acc[0] += v["value"]
            acc[1] += 1
    return {slot: float(s / c) for slot, (s, c) in sums.items()}


def check(name: str, got: list[tuple[int, str, float]], ref: dict[tuple[int, str], float]) -> None:
    """Every window result once and equal to the reference, bit for bit."""
    seen: dict[tuple[int, str], float] = {}
    repeated = []
    for start, key, mean in got:
        if (start, key) in seen:
            repeated.append((start, key))
        seen[(start, key)] = mean
    missing = sorted(set(ref) - set(seen))
    extra = sorted(set(seen) - set(ref))
    wrong = sorted(s for s in set(ref) & set(seen) if seen[s] != ref[s])
    if repeated or missing or extra or wrong:
        lines = [f"{name}: WRONG RESULTS ({len(got)} results, {len(ref)} expected)"]
        for what, slots in (("repeated", repeated), ("missing", missing), ("unexpected", extra)):
            if slots:
                lines.append(f"  {len(slots)} {what}, e.g. {slots[:3]}")
        for s in wrong[:5]:
            lines.append(f"  window {s}: {seen[s]!r}, reference {ref[s]!r}")
        if wrong:
            lines.append(f"  {len(wrong)} windows differ in all")
        raise BenchError("\n".join(lines))


@dataclass
class Measured:
    rate: float  # records/s
    p50: float  # ms
    p99: float  # ms
    cpu: float  # seconds


def percentile(data: list[float], q: float) -> float:
    data = sorted(data)
    return data[min(len(data) - 1, round(q / 100 * (len(data) - 1)))]


def measure(
    spec: Spec,
    last: dict[tuple[int, str], int],
    made: dict[int, float],
    received: list[tuple[int, str, float, float]],
    cpu: float,
) -> Measured:
    if 0 not in made or not received:
        raise BenchError("no record was timed: did the sources call bench.stream:make_record?")
    first = min(made.values())  # record 0's making, or an earlier source partition's first
    latencies = []
    for start, key, _, at in received:
        i = last[(start, key)]
        if i not in made:
            raise BenchError(f"record {i} (last of window {start} of {key}) was never timed")
        latencies.append(at - made[i])
    elapsed = max(at for *_, at in received) - first
    return Measured(
        spec.records / elapsed,
        1000 * percentile(latencies, 50),
        1000 * percentile(latencies, 99),
        cpu,
    )


def timeout_for(spec: Spec) -> float:
    return 60.0 + spec.records / 5000  # 260 s for a million records: far beyond any sane run


# ---- ours -----------------------------------------------------------------------------------


def graph_data(spec: Spec, sink_path: Path, vectorized: bool) -> dict[str, Any]:
    scaled: dict[str, Any] = {"name": "scaled", "type": "map", "input": "gen"}
    if vectorized:
        scaled.update(fn="apps.demos.stream_demo:scale_columns", vectorized=True)
    else:
        scaled.update(fn="apps.demos.stream_demo:scale")
    return {
        "flow": "/bench",
        "settings": {"batch_bytes": 262144, **SETTINGS},
        "operators": [
            {
                "name": "gen",
                "type": "generator",
                "count": spec.records,
                "keys": spec.keys,
                "events_per_second": spec.eps,
                "batch": BATCH,
                "fn": "bench.stream:make_record",
            },
            scaled,
            {"name": "keyed", "type": "key_by", "input": "scaled", "field": "sensor"},
            {
                "name": "means",
                "type": "window",
                "input": "keyed",
                "tumbling": "1s",
                "aggregate": "mean",
                "field": "value",
            },
            {"name": "stamped", "type": "map", "input": "means", "fn": "bench.stream:stamp"},
            {"name": "out", "type": "file_sink", "input": "stamped", "path": str(sink_path)},
        ],
    }


def file_results(path: Path) -> list[tuple[int, str, float]]:
    out = []
    for line in path.read_text().splitlines():
        w = json.loads(line)["value"]
        out.append((w["start"], w["key"], w["value"]))
    return out


async def run_ours(spec: Spec, workdir: Path, vectorized: bool) -> float:
    """The graph on one in-process forwarder; returns CPU seconds."""
    from apps.inproc import attach_endpoint
    from compute.stream.flow import FlowRun
    from compute.stream.graph import parse_graph
    from forwarder.config import config_from_dict
    from forwarder.daemon import ForwarderDaemon
    from icn.dataplane.endpoint import Endpoint

    graph = parse_graph(graph_data(spec, workdir / "ours.jsonl", vectorized), "bench/stream.py")
    daemon = ForwarderDaemon(config_from_dict({"listen": {}}))
    await daemon.start()

    async def connect() -> Endpoint:
        return attach_endpoint(daemon, label="flow")

    run = FlowRun(graph, connect, state_dir=workdir / "state")
    LOOPS.add(loops.running())
    try:
        cpu0 = time.process_time()
        await run.start()
        if not await run.wait(timeout=timeout_for(spec)):
            raise BenchError(f"ours: the sink did not end within {timeout_for(spec):g} s")
        return time.process_time() - cpu0
    finally:
        await run.stop()
        await daemon.stop()


def ours(
    spec: Spec, ref: dict[tuple[int, str], float], workdir: Path, vectorized: bool = False
) -> Measured:
    from apps.loop import run_loop

    last = prepare(spec)
    cpu = run_loop(run_ours(spec, workdir, vectorized))
    check("ours", [r[:3] for r in RECEIVED], ref)
    check("ours (file sink)", file_results(workdir / "ours.jsonl"), ref)
    return measure(spec, last, MADE, RECEIVED, cpu)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return math.nan


def ours_procs(
    spec: Spec, ref: dict[tuple[int, str], float], workdir: Path, vectorized: bool = False
) -> Measured:
    """One process per operator and a forwarder process (Unix socket)."""
    from apps.procs import ProcessGroup, icn_argv

    last = last_records(spec)
    sock = workdir / "fwd.sock"
    graph = workdir / "graph.yaml"
    sink_path = workdir / "procs.jsonl"
    data = graph_data(spec, sink_path, vectorized)
    graph.write_text(json.dumps(data))  # JSON is YAML
    stamps = workdir / "stamps"
    path = os.pathsep.join(filter(None, (str(ROOT), os.getenv("PYTHONPATH"))))
    env = {"PYTHONPATH": path, SPEC_ENV: spec.env(), OUT_ENV: str(stamps)}
    limit = timeout_for(spec)
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)), env={"PYTHONPATH": path})
        fwd.wait_for("forwarder ready", stream="stderr")
        fwd_cpu0 = cpu_seconds(fwd.pid)
        PROC_LOOPS.add(loops.of_pid(fwd.pid))
        ops = [op["name"] for op in data["operators"]]
        children = []
        for op in reversed(ops):  # readers first: the source's first batches find them there
            argv = icn_argv("flow", "run", str(graph), "--transport", f"unix://{sock}")
            argv += ["--only", op, "--quiet", "--timeout", f"{limit:g}s"]
            argv += ["--state-dir", str(workdir / "state")]
            children.append(group.start(op, argv, env=env))
        sink, others = children[0], children[1:]
        for child in children:  # the loop each runs, once it runs (unknown if already ended)
            with contextlib.suppress(RuntimeError, TimeoutError):
                child.wait_for("flow ready", timeout=limit, stream="stderr")
            PROC_LOOPS.add(loops.of_pid(child.pid))
        try:
            code = sink.wait(limit + 30)
        except subprocess.TimeoutExpired:
            raise BenchError(f"ours-procs: the sink did not end within {limit + 30:g} s") from None
        if code != 0:
            raise BenchError(f"ours-procs: the sink exited with {code}:\n{sink.errors()[-2000:]}")
        # the sink is done; a producer still waiting for a reader's last report is stopped
        # (SIGTERM: it still writes what it noted), as the in-process run stops its instances
        lingering = []
        for child in others:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(LINGER)
            if child.proc.poll() is None:
                lingering.append(child.name)
            code = child.stop()
            if code not in (0, INTERRUPTED):
                raise BenchError(
                    f"ours-procs: {child.name} exited with {code}:\n{child.errors()[-2000:]}"
                )
        if lingering:
            print(
                f"  ours-procs: {', '.join(lingering)} still running {LINGER:g} s after the "
                "sink ended (waiting for a reader's last report); stopped",
                file=sys.stderr,
            )
        fwd_cpu = cpu_seconds(fwd.pid) - fwd_cpu0
    made: dict[int, float] = {}
    received: list[tuple[int, str, float, float]] = []
    cpu = fwd_cpu
    dumps = list(workdir.glob("stamps.*.json"))
    if len(dumps) != len(children):
        raise BenchError(f"ours-procs: {len(dumps)} of {len(children)} processes wrote stamps")
    for dump in dumps:
        data = json.loads(dump.read_text())
        cpu += data["cpu"]
        made.update({int(i): at for i, at in data["made"].items()})
        received += [(r[0], r[1], r[2], r[3]) for r in data["received"]]
    check("ours-procs", [r[:3] for r in received], ref)
    check("ours-procs (file sink)", file_results(sink_path), ref)
    return measure(spec, last, made, received, cpu)


# ---- bytewax --------------------------------------------------------------------------------


def bytewax_version() -> str | None:
    try:
        importlib.import_module("bytewax")
        return importlib.metadata.version("bytewax")
    except ImportError:
        return None


def bytewax_flow(spec: Spec) -> Any:
    """The pipeline as a bytewax dataflow.  Its source is a DynamicSource: worker w of W makes
    the records of the keys k with k % W == w, in record order (all of them with one worker),
    so every worker reads its own share and each key's records stay in order."""
    from datetime import UTC, datetime, timedelta

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import DynamicSource, StatelessSourcePartition
    from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    n, keys, eps = spec.records, spec.keys, spec.eps

    class Part(StatelessSourcePartition[tuple[int, dict[str, Any]]]):
        def __init__(self, worker: int, workers: int) -> None:
            mine = [k for k in range(keys) if k % workers == worker]
            self.todo = (i for base in range(0, n, keys) for k in mine if (i := base + k) < n)

        def next_batch(self) -> list[tuple[int, dict[str, Any]]]:
            out = [(int(i * 1000 / eps), make_record(i)) for i in islice(self.todo, BATCH)]
            if not out:
                raise StopIteration
            return out

    class Source(DynamicSource[tuple[int, dict[str, Any]]]):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Part:
            return Part(worker_index, worker_count)

    class SinkPart(StatelessSinkPartition[tuple[str, tuple[int, list[Any]]]]):
        def write_batch(self, items: list[tuple[str, tuple[int, list[Any]]]]) -> None:
            now = time.time()
            for key, (window_id, (total, count)) in items:
                RECEIVED.append((window_id * SIZE_MS, key, float(total / count), now))

    class Sink(DynamicSink[tuple[str, tuple[int, list[Any]]]]):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> SinkPart:
            return SinkPart()

    def fold(acc: list[Any], item: tuple[int, dict[str, Any]]) -> list[Any]:
        acc[0] += item[1]["value"]
        acc[1] += 1
        return acc

    # event time only: the watermark is the newest event time (as ours), never the wall clock,
    # which would close windows early whenever the pipeline runs slower than 1 s per second
    clock: EventClock[tuple[int, dict[str, Any]]] = EventClock(
        lambda item: epoch + timedelta(milliseconds=item[0]),
        wait_for_system_duration=timedelta(0),
        now_getter=lambda: epoch,
        to_system_utc=lambda _: None,
    )
    flow = Dataflow("bench_stream")
    records = op.input("gen", flow, Source())
    scaled = op.map("scaled", records, lambda item: (item[0], scale(item[1])))
    keyed = op.key_on("keyed", scaled, lambda item: item[1]["sensor"])
    means = fold_window(
        "means",
        keyed,
        clock,
        TumblingWindower(timedelta(milliseconds=SIZE_MS), align_to=epoch),
        lambda: [0, 0],
        fold,
        lambda a, b: [a[0] + b[0], a[1] + b[1]],
        ordered=False,  # arrival order, as ours (each key's records come in event-time order)
    )
    op.output("out", means.down, Sink())
    return flow


def bytewax(spec: Spec, ref: dict[tuple[int, str], float], workdir: Path) -> Measured:
    """One worker in this process (run_main)."""
    from bytewax.testing import run_main

    flow = bytewax_flow(spec)
    last = prepare(spec)
    cpu0 = time.process_time()
    run_main(flow)  # type: ignore[no-untyped-call]
    cpu = time.process_time() - cpu0
    check("bytewax", [r[:3] for r in RECEIVED], ref)
    return measure(spec, last, MADE, RECEIVED, cpu)


def bytewax_process(proc_id: int, addresses: str) -> None:
    """bytewax-procs' children: process ``proc_id`` of the cluster at ``addresses`` (host:port
    separated by ``;``), one worker.  Its CPU counts from here (bytewax imported), as the
    one-worker run's counts from its run_main; what it noted is written at exit."""
    from bytewax.testing import cluster_main

    flow = bytewax_flow(Spec.from_env(os.environ[SPEC_ENV]))
    _CPU_FROM[0] = time.process_time()
    cluster_main(flow, addresses.split(";"), proc_id, worker_count_per_proc=1)  # type: ignore[no-untyped-call]


def free_tcp_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now (bound at once, then released)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def bytewax_procs(spec: Spec, ref: dict[tuple[int, str], float], workdir: Path) -> Measured:
    """bytewax as a cluster of BYTEWAX_PROCS[0] processes of one worker each (cluster_main, as
    ``python -m bytewax.testing -p N`` starts them; processes, not worker threads, as its
    Python steps hold the GIL), every worker reading its own share of the keys."""
    from apps.procs import ProcessGroup

    procs = BYTEWAX_PROCS[0]
    last = last_records(spec)
    addresses = ";".join(f"127.0.0.1:{port}" for port in free_tcp_ports(procs))
    stamps = workdir / "stamps"
    path = os.pathsep.join(filter(None, (str(ROOT), os.getenv("PYTHONPATH"))))
    env = {"PYTHONPATH": path, SPEC_ENV: spec.env(), OUT_ENV: str(stamps)}
    code = "import sys, bench.stream as s; s.bytewax_process(int(sys.argv[1]), sys.argv[2])"
    limit = timeout_for(spec)
    with ProcessGroup(workdir) as group:
        children = [
            group.start(f"bytewax-{i}", [sys.executable, "-c", code, str(i), addresses], env=env)
            for i in range(procs)
        ]
        deadline = time.monotonic() + limit + 30
        for child in children:
            try:
                code_ = child.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise BenchError(
                    f"bytewax-procs: {child.name} did not end within {limit + 30:g} s"
                ) from None
            if code_ != 0:
                raise BenchError(
                    f"bytewax-procs: {child.name} exited with {code_}:\n{child.errors()[-2000:]}"
                )
    made: dict[int, float] = {}
    received: list[tuple[int, str, float, float]] = []
    cpu = 0.0
    dumps = list(workdir.glob("stamps.*.json"))
    if len(dumps) != procs:
        raise BenchError(f"bytewax-procs: {len(dumps)} of {procs} processes wrote stamps")
    for dump in dumps:
        data = json.loads(dump.read_text())
        cpu += data["cpu"]
        made.update({int(i): at for i, at in data["made"].items()})
        received += [(r[0], r[1], r[2], r[3]) for r in data["received"]]
    check("bytewax-procs", [r[:3] for r in received], ref)
    return measure(spec, last, made, received, cpu)


# ---- a plain asyncio pipeline ---------------------------------------------------------------


async def run_queues(spec: Spec) -> None:
    n, eps, size = spec.records, spec.eps, SIZE_MS
    Item = tuple[int, dict[str, Any]]
    to_map: asyncio.Queue[list[Item] | None] = asyncio.Queue(QUEUE)
    to_window: asyncio.Queue[list[Item] | None] = asyncio.Queue(QUEUE)
    to_sink: asyncio.Queue[list[tuple[int, str, float]] | None] = asyncio.Queue(QUEUE)

    async def source() -> None:
        for i in range(0, n, BATCH):
            await to_map.put(
                [(int(g * 1000 / eps), make_record(g)) for g in range(i, min(n, i + BATCH))]
            )
        await to_map.put(None)

    async def mapper() -> None:
        while (batch := await to_map.get()) is not None:
            await to_window.put([(t, scale(v)) for t, v in batch])
        await to_window.put(None)

    async def window() -> None:
        held: dict[int, dict[str, list[Any]]] = {}  # start -> key -> [sum, count]
        while (batch := await to_window.get()) is not None:
            for t, v in batch:
                start = t - t % size
                accs = held.get(start)
                if accs is None:
                    accs = held[start] = {}
                acc = accs.get(v["sensor"])
                if acc is None:
                    accs[v["sensor"]] = [0 + v["value"], 1]
                else:
                    acc[0] += v["value"]
                    acc[1] += 1
            watermark = batch[-1][0] if batch else -1
            due = sorted(s for s in held if s + size <= watermark)
            if due:
                await to_sink.put(
                    [(s, k, float(a[0] / a[1])) for s in due for k, a in held.pop(s).items()]
                )
        await to_sink.put(
            [(s, k, float(a[0] / a[1])) for s in sorted(held) for k, a in held[s].items()]
        )
        await to_sink.put(None)

    async def sink() -> None:
        while (batch := await to_sink.get()) is not None:
            now = time.time()
            RECEIVED.extend((s, k, mean, now) for s, k, mean in batch)

    LOOPS.add(loops.running())
    async with asyncio.timeout(timeout_for(spec)):
        await asyncio.gather(source(), mapper(), window(), sink())


def plain_asyncio(spec: Spec, ref: dict[tuple[int, str], float], workdir: Path) -> Measured:
    from apps.loop import run_loop

    last = prepare(spec)
    cpu0 = time.process_time()
    run_loop(run_queues(spec))
    cpu = time.process_time() - cpu0
    check("asyncio", [r[:3] for r in RECEIVED], ref)
    return measure(spec, last, MADE, RECEIVED, cpu)


# ---- the table ------------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[Spec, dict[tuple[int, str], float], Path], Measured]] = {
    "ours": ours,
    "ours-vec": partial(ours, vectorized=True),
    "ours-procs": ours_procs,
    "ours-procs-vec": partial(ours_procs, vectorized=True),
    "bytewax": bytewax,
    "bytewax-procs": bytewax_procs,
    "asyncio": plain_asyncio,
}


def label(impl: str, bw_version: str | None) -> str:
    return {
        "ours": "ours (1 process)",
        "ours-vec": "ours (1 process, vec)",
        "ours-procs": "ours (process per op)",
        "ours-procs-vec": "ours (procs, vec map)",
        "bytewax": f"bytewax {bw_version}",
        "bytewax-procs": f"bytewax x{BYTEWAX_PROCS[0]} procs",
        "asyncio": "asyncio queues",
    }[impl]


def median_of(runs: list[Measured]) -> Measured:
    return Measured(
        statistics.median(r.rate for r in runs),
        statistics.median(r.p50 for r in runs),
        statistics.median(r.p99 for r in runs),
        statistics.median(r.cpu for r in runs),
    )


def print_table(rows: dict[str, Measured], bw_version: str | None) -> None:
    head = f"{'':<30}{'records/s':>12}{'p50 ms':>10}{'p99 ms':>10}{'CPU s':>8}"
    print(head)
    for impl, m in rows.items():
        print(
            f"{label(impl, bw_version):<30}{m.rate:>12,.0f}{m.p50:>10.1f}{m.p99:>10.1f}"
            f"{m.cpu:>8.2f}"
        )
    pairs: list[tuple[str, str]] = [(a, b) for a in OURS for b in PEERS if a in rows and b in rows]
    for a, b in (("ours-procs", "ours"), ("ours-vec", "ours"), ("ours-procs-vec", "ours-procs")):
        if a in rows and b in rows:
            pairs.append((a, b))
    if pairs:
        print(f"{'ratio':<30}{'records/s':>12}{'p50':>10}{'p99':>10}{'CPU':>8}")
    for a, b in pairs:
        x, y = rows[a], rows[b]
        name = f"{a}/{b}"
        print(
            f"{name:<30}{x.rate / y.rate:>12.2f}{x.p50 / y.p50:>10.2f}{x.p99 / y.p99:>10.2f}"
            f"{x.cpu / y.cpu:>8.2f}"
        )
    if pairs:
        print("(ratios a/b: records/s above 1 and p50, p99, CPU below 1 favour a)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records in all")
    ap.add_argument("--keys", type=int, default=100, help="distinct sensors")
    ap.add_argument("--events-per-second", type=float, default=100_000.0, help="of event time")
    ap.add_argument("--repeat", type=int, default=1, help="runs per implementation (median)")
    ap.add_argument("--only", default=",".join(IMPLS), help=f"some of {','.join(IMPLS)}")
    ap.add_argument(
        "--window", type=int, default=SETTINGS["window"], help="ours: Interests in flight per input"
    )
    ap.add_argument(
        "--buffer",
        type=int,
        default=SETTINGS["buffer"],
        help="ours: batches ahead of the slowest reader",
    )
    ap.add_argument(
        "--lead",
        type=float,
        default=SETTINGS["lead"],
        help="ours: seconds ahead of the slowest reader",
    )
    ap.add_argument(
        "--bytewax-procs",
        type=int,
        default=BYTEWAX_PROCS[0],
        help=f"bytewax-procs: processes of one worker (default: this machine's cores, "
        f"{BYTEWAX_PROCS[0]})",
    )
    args = ap.parse_args(argv)
    if args.bytewax_procs < 1:
        ap.error("--bytewax-procs must be >= 1")
    BYTEWAX_PROCS[0] = args.bytewax_procs
    if args.window < 1 or args.buffer < 2 or args.lead <= 0:
        ap.error("--window must be >= 1, --buffer >= 2 and --lead > 0")
    SETTINGS.update(window=args.window, buffer=args.buffer, lead=args.lead)
    if args.records < 1 or args.keys < 1 or args.events_per_second <= 0 or args.repeat < 1:
        ap.error("--records, --keys, --events-per-second and --repeat must be positive")
    impls = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in impls if s not in IMPLS]
    if unknown or not impls:
        ap.error(f"--only {args.only!r}: choose among {','.join(IMPLS)}")
    bw_version = bytewax_version()
    if bw_version is None and {"bytewax", "bytewax-procs"} & set(impls):
        print(NO_BYTEWAX)
        impls = [impl for impl in impls if not impl.startswith("bytewax")]
    logging.getLogger("forwarder").setLevel(logging.ERROR)  # its counter line at stop

    spec = Spec(args.records, args.keys, args.events_per_second)
    ref = reference(spec)
    runs: dict[str, list[Measured]] = {impl: [] for impl in impls}
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-stream-"))
    try:
        for r in range(args.repeat):
            for impl in impls:
                run_dir = workdir / f"{impl}-{r}"
                run_dir.mkdir()
                m = RUNNERS[impl](spec, ref, run_dir)
                runs[impl].append(m)
                print(
                    f"  {impl} run {r + 1}: {m.rate:,.0f} records/s, p50 {m.p50:.1f} ms, "
                    f"p99 {m.p99:.1f} ms, {m.cpu:.2f} CPU s; {len(ref)} results checked",
                    file=sys.stderr,
                    flush=True,
                )
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    windows = len({start for start, _ in ref})
    n = BYTEWAX_PROCS[0]
    ran = {"this process": "/".join(sorted(LOOPS)), "ours' processes": "/".join(sorted(PROC_LOOPS))}
    print(
        f"source -> map -> key by -> 1 s tumbling mean -> sink: {spec.records:,} records, "
        f"{spec.keys} keys, {spec.eps:,.0f} events/s ({windows} windows, {len(ref):,} results, "
        f"all equal to the reference); median of {args.repeat}; event loops: "
        f"{loops.summary({k: v for k, v in ran.items() if v}) or 'none ran'}"
        + (
            f"; bytewax x{n} procs: {n} processes of one worker"
            + (", as many as this machine has cores" if n == CORES else "")
            if "bytewax-procs" in runs
            else ""
        )
    )
    rows = {impl: median_of(ms) for impl, ms in runs.items()}
    print_table(rows, bw_version)
    for line in headlines(rows):
        print(line)
    return 0


def headlines(rows: dict[str, Measured]) -> list[str]:
    """A line for each of HEADLINES that ran, ours against bytewax on a process per core
    (bytewax-procs; one worker where only that ran); the like-for-like one last.  Where
    bytewax ran faster on one worker than on its processes, a line before them says so and
    gives ours' records/s against that, the peer at its best."""
    peer = next((p for p in ("bytewax-procs", "bytewax") if p in rows), None)
    out = []
    one, many = rows.get("bytewax"), rows.get("bytewax-procs")
    if one is not None and many is not None and one.rate > many.rate:
        against = [
            f"{what} {rows[ours_].rate / one.rate:.2f}"
            for what, ours_, _ in HEADLINES
            if ours_ in rows
        ]
        out.append(
            f"note: bytewax ran faster on one worker ({one.rate:,.0f} records/s) than on "
            f"{BYTEWAX_PROCS[0]} processes ({many.rate:,.0f})"
            + (f"; ours' records/s against one worker: {', '.join(against)}" if against else "")
        )
    for what, ours_, how in HEADLINES:
        if peer is None or ours_ not in rows:
            continue
        x, y = rows[ours_], rows[peer]
        bw = "one worker" if peer == "bytewax" else f"{BYTEWAX_PROCS[0]} processes of one worker"
        out.append(
            f"{ours_}/{peer} records/s: {x.rate / y.rate:.2f}, p50: {x.p50 / y.p50:.2f}, "
            f"CPU: {x.cpu / y.cpu:.2f} ({what}: ours {how}; bytewax {bw})"
        )
    return out


if __name__ == "__main__":
    # run the module as bench.stream, the name the graph's functions are imported by, so the
    # tables the sources and sinks fill are the ones main() reads
    sys.exit(importlib.import_module("bench.stream").main())
