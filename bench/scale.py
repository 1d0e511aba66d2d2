"""Scenario start-up and memory at scale: 25 to 200 nodes on the local backend.

For each shape (a line, and a random connected graph of mean degree about 3) and each size, a
scenario is generated into a temporary directory: a producer on the node farthest from n0, a
consumer on n0 fetching through every hop between them (the whole line), routes: auto, and an
expectation that the consumer succeeds.  Each is run by the launcher as ``icn scenario run``
runs it, and measured:

* ready: seconds from the start of the run to its links, services and routes being in place
  (the "links and routes installed" event), and ``fwd s`` of them to every forwarder ready;
* total RSS: the sum of VmRSS of the run's processes (forwarder processes, the producer and
  the consumer; the launcher apart), the most seen while the scenario ran, and that over the
  number of nodes;
* the consumer's success ratio, and whether every expectation passed.

The peer, measured in the same run: the same scenarios with a process per node
(``nodes_per_process: 1``), the launcher's way before packing, up to --solo-max nodes.  The last
line is ``scale: 100 nodes ready in X s, Y MB per node`` (the slower shape at 100 nodes), or
``scale: 100 nodes not ready (...)`` naming each shape that failed or never became ready.

Run: flock /tmp/bench.lock .venv/bin/python bench/scale.py [--sizes 25,50,100,200]
     [--shapes line,random] [--per-process N] [--solo-max 50] [--duration 6]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ("line", "random")
RSS_EVERY = 0.5


def line_edges(n: int) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(n - 1)]


def random_edges(n: int, seed: int) -> list[tuple[int, int]]:
    """A connected graph: each node joins a random earlier one (a random tree), then n/2 more
    links between random pairs not yet linked (mean degree about 3)."""
    rng = random.Random(seed)
    edges = {(rng.randrange(i), i) for i in range(1, n)}
    target = len(edges) + n // 2
    while len(edges) < target and n > 2:
        a, b = sorted(rng.sample(range(n), 2))
        edges.add((a, b))
    return sorted(edges)


def farthest(n: int, edges: list[tuple[int, int]], start: int = 0) -> tuple[int, int]:
    """The node farthest from ``start`` in hops (the lowest-numbered among ties), and its
    distance."""
    nbrs: dict[int, list[int]] = {i: [] for i in range(n)}
    for a, b in edges:
        nbrs[a].append(b)
        nbrs[b].append(a)
    dist = {start: 0}
    queue = deque([start])
    while queue:
        x = queue.popleft()
        for y in nbrs[x]:
            if y not in dist:
                dist[y] = dist[x] + 1
                queue.append(y)
    far = max(dist, key=lambda i: (dist[i], -i))
    return far, dist[far]


def scenario_yaml(
    shape: str, n: int, *, seed: int = 1, duration: float = 6.0, per_process: int | None = None
) -> str:
    """A scenario of ``n`` nodes n0..n<n-1> in ``shape``: a producer at the far end from n0,
    a consumer on n0 from 1 s to the end, every request expected to succeed."""
    edges = line_edges(n) if shape == "line" else random_edges(n, seed)
    far, hops = farthest(n, edges)
    lines = [
        f"# {shape} of {n} nodes; the consumer on n0 fetches from the producer on n{far}, "
        f"{hops} hops away",
        f"name: scale-{shape}-{n}",
        f"duration: {duration:g}s",
    ]
    if per_process is not None:
        lines.append(f"nodes_per_process: {per_process}")
    lines.append("nodes:")
    lines += [f"  n{i}: {{}}" for i in range(n)]
    lines.append("links:")
    lines += [f"  - {{between: [n{a}, n{b}], delay: 1ms}}" for a, b in edges]
    # a request crosses every hop twice: 2 ms each way per hop plus forwarding on a busy machine
    lifetime = max(1.0, round(hops * 0.02, 1))
    lines += [
        "routes: auto",
        "services:",
        f"  - {{name: producer, node: n{far}, entry: 'apps.workloads:producer', "
        "announce: [/scale], args: {prefix: /scale, size: 100}}",
        "workloads:",
        "  - {name: consumer, node: n0, entry: 'apps.workloads:consumer', start: 1s, "
        f"args: {{prefix: /scale, rate: 20, lifetime: {lifetime:g}s, retries: 2}}}}",
        "report:",
        "  interval: 2s",
        "  plots: false",
        "  expect:",
        "    - {workload: consumer, min_success_ratio: 99%}",
    ]
    return "\n".join(lines) + "\n"


def vm_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Result:
    shape: str
    nodes: int
    per_process: int
    processes: int
    fwd_s: float | None
    ready_s: float | None
    rss_mb: float
    consumer_ok: float | None
    passed: bool
    error: str | None = None

    @property
    def mb_per_node(self) -> float:
        return self.rss_mb / self.nodes


async def run_one(path: Path, out: Path) -> tuple[Any, dict[str, Any], dict[str, float], float]:
    """Run the scenario at ``path`` as ``icn scenario run`` does; the runner, its report,
    seconds to forwarders ready (``fwd``) and to ready (``ready``), and the most total RSS of
    its processes seen."""
    from apps.scenario.loader import load_scenario
    from apps.scenario.report import write_report
    from apps.scenario.runner import ScenarioRunner

    sc = load_scenario(path)
    t0 = time.monotonic()
    ready: dict[str, float] = {}

    def on_event(t: float | None, text: str) -> None:
        if "forwarders ready" in text:
            ready["fwd"] = time.monotonic() - t0
        if "routes installed" in text:
            ready["ready"] = time.monotonic() - t0

    runner = ScenarioRunner(sc, out, on_event=on_event)
    most = 0.0
    stop = asyncio.Event()

    async def watch_rss() -> None:
        nonlocal most
        while not stop.is_set():
            if "ready" in ready:
                live = [c.pid for c in runner.children if c.proc.poll() is None]
                most = max(most, sum(vm_rss_mb(p) for p in live))
            await asyncio.sleep(RSS_EVERY)

    watcher = asyncio.ensure_future(watch_rss())
    try:
        report = await runner.run()
        write_report(report, out, plots=False)
    finally:
        stop.set()
        await watcher
    return runner, report, ready, most


def measure(shape: str, n: int, per_process: int | None, args: argparse.Namespace) -> Result:
    from apps.scenario.runner import ScenarioFailed

    work = Path(tempfile.mkdtemp(prefix=f"icn-scale-{shape}-{n}-"))
    try:
        path = work / "scenario.yaml"
        path.write_text(
            scenario_yaml(shape, n, seed=args.seed, duration=args.duration, per_process=per_process)
        )
        try:
            runner, report, ready, rss = asyncio.run(run_one(path, work / "out"))
        except ScenarioFailed as exc:
            first = str(exc).splitlines()[0]
            return Result(shape, n, per_process or 0, 0, None, None, 0.0, None, False, first)
        wl = report["workloads"]["consumer"]
        return Result(
            shape,
            n,
            runner.per_process,
            len(runner.groups),
            ready.get("fwd"),
            ready.get("ready"),
            rss,
            wl.get("success_ratio"),
            bool(report["passed"]),
        )
    finally:
        if args.keep:
            print(f"  kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def row(r: Result, label: str) -> str:
    if r.error is not None:
        return f"{r.shape:<7} {r.nodes:>5} {label:<10} FAILED: {r.error}"
    fwd = f"{r.fwd_s:.1f}" if r.fwd_s is not None else "-"
    ready = f"{r.ready_s:.1f}" if r.ready_s is not None else "-"
    ok = f"{r.consumer_ok:.1%}" if r.consumer_ok is not None else "-"
    return (
        f"{r.shape:<7} {r.nodes:>5} {label:<10} {r.processes:>5} {fwd:>6} {ready:>8} "
        f"{r.rss_mb:>9.0f} "
        f"{r.mb_per_node:>8.1f} {ok:>8}  {'pass' if r.passed else 'FAIL'}"
    )


def at_size(sizes: list[int]) -> int:
    """The size the last line speaks of: 100 nodes, else the largest run."""
    return 100 if 100 in sizes else max(sizes)


def headline(at: int, cells: list[Result]) -> str:
    """The last line: ``scale: N nodes ready in X s, Y MB per node``, the slower shape's
    seconds and the larger MB per node.  A shape whose run failed or that never became ready
    has no seconds to show, so the line says so instead of a time."""
    never = [
        f"{c.shape} {'failed: ' + c.error if c.error is not None else 'never ready'}"
        for c in cells
        if c.error is not None or c.ready_s is None
    ]
    if never:
        return f"scale: {at} nodes not ready ({'; '.join(never)})"
    ready = max(c.ready_s for c in cells if c.ready_s is not None)
    mb = max(c.mb_per_node for c in cells)
    return f"scale: {at} nodes ready in {ready:.1f} s, {mb:.1f} MB per node"


def main(args: argparse.Namespace) -> int:
    print(
        f"{'shape':<7} {'nodes':>5} {'packing':<10} {'procs':>5} {'fwd s':>6} {'ready s':>8} "
        f"{'RSS MB':>9} "
        f"{'MB/node':>8} {'consumer':>8}  expectations",
        flush=True,
    )
    packed: dict[tuple[str, int], Result] = {}
    solo: dict[tuple[str, int], Result] = {}
    for shape in args.shapes:
        for n in args.sizes:
            r = measure(shape, n, args.per_process, args)
            packed[shape, n] = r
            print(row(r, f"{r.per_process}/proc" if r.per_process > 1 else "solo"), flush=True)
            if n <= args.solo_max and r.per_process > 1:
                s = measure(shape, n, 1, args)
                solo[shape, n] = s
                print(row(s, "solo"), flush=True)
    failed = [
        r for r in packed.values() if r.error is not None or not r.passed or r.ready_s is None
    ]
    for (shape, n), s in solo.items():
        p = packed[shape, n]
        if s.error is None and p.error is None and p.ready_s and s.ready_s:
            print(
                f"{shape} {n} nodes, packed vs a process per node: "
                f"{s.mb_per_node / p.mb_per_node:.1f}x less memory, "
                f"{s.ready_s / p.ready_s:.1f}x faster to ready"
            )
    print(headline(at_size(args.sizes), [packed[s, at_size(args.sizes)] for s in args.shapes]))
    return 1 if failed else 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:  # run as a script: apps sits beside bench
        sys.path.insert(0, str(ROOT))
    # the size and shape lists, as the allreduce benches read theirs
    from bench.arguments import parse_choices, parse_ints

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=parse_ints, default=[25, 50, 100, 200], help="node counts")
    shapes = parse_choices(SHAPES)
    ap.add_argument("--shapes", type=shapes, default=list(SHAPES), help="line, random")
    ap.add_argument(
        "--per-process", type=int, default=None, help="nodes_per_process (default: automatic)"
    )
    ap.add_argument("--solo-max", type=int, default=50, help="peer runs up to this many nodes")
    ap.add_argument("--duration", type=float, default=6.0, help="seconds each scenario runs")
    ap.add_argument("--seed", type=int, default=1, help="of the random graphs")
    ap.add_argument("--keep", action="store_true", help="keep each run's directory")
    sys.exit(main(ap.parse_args()))
