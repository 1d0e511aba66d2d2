"""Allreduce where the network is the bottleneck: two racks, rate-limited links, gloo's ring
against aggregation in the forwarders, in the same namespaces over the same links (root only).

Topology (network namespaces this benchmark creates and removes, through the netns backend of
the scenario launcher, so ``icn scenario clean`` also removes what a killed run left):

        w0 w1 w2 w3         w4 w5 w6 w7        each worker: its own namespace and link
         \\ \\ / /           \\ \\ / /         (a veth pair) to its rack
            ra ------ spine ------ rb            each rack: one uplink to the spine

Every link is shaped in both directions with ``tc qdisc ... tbf`` at each rate of ``--mbit`` in
turn (uplinks at ``--uplink-ratio`` times that, by default the same rate: 4:1 oversubscribed,
four workers behind each uplink).
The racks and the spine route IP between the namespaces, so both peers cross the same links:

  gloo:        torch.distributed's gloo ring allreduce over TCP between the worker namespaces
               (ranks 0-3 in rack ra, 4-7 in rb: the ring crosses each uplink once each way)
  in-network:  a forwarder in each rack and in the spine (TCP faces over the links), each with
               an aggregator in its process (bench/allreduce_host.py --config): the racks sum
               their workers' chunks and the spine sums the racks' partials; every worker
               asks its rack for the sum, whose Interests meet in the rack's PIT, so one copy
               of each sum chunk crosses each uplink.  A chunk is one packet; above 8 KiB the
               forwarders' ``tcp_max_packet`` lets TCP faces carry it (jumbo packets: every
               forwarder of this fabric is set alike), as gloo's TCP carries any message size
  two-jobs:    two in-network jobs at once (names /ar and /ar2, a worker of each in every
               worker namespace) sharing the aggregators' processes and the links; each job's
               time is compared with in-network's, alone

With ``--spines 2`` the fabric has a second spine, and each rack an uplink to each, shaped
alike (gloo's IP routes still go through the first spine: its ring has one TCP flow per
direction on a rack's uplinks, which per-flow ECMP could not split anyway):

        w0 w1 w2 w3         w4 w5 w6 w7
         \\ \\ / /           \\ \\ / /
            ra ------ spine ------ rb
              \\                  /
               ------ spine2 -----

Each spine's forwarder runs a copy of the root aggregator (the plan's root, serving the job's
sum prefix):

  in-network:  single path: the racks route the sum prefix to the first spine only, whose root
               pulls both racks' partials; the second spine is idle
  multipath:   the racks route the sum prefix to both spines at the same cost, the face to the
               first spine made first (so both racks list the spines in the same order), with
               the multipath strategy on it: a round's consecutive
               chunks alternate between the spines, the same way from both racks (the name
               decides), and a chunk's root pulls that chunk's partials from both racks, so each
               chunk is summed once, by one root, in the plan's order: the same bits whichever
               spine

Each mode: a warm-up, then --repeat timed allreduces, each after a barrier; a round counts its
slowest worker, the table shows the median round.  Every result is checked (ours bit for bit
against numpy's sum in the plan's order; gloo's against the same sum, sampled, to 1e-4).
Bytes per uplink are read from the rack end's interface counters around the timed rounds
(up: sent by the rack, down: received), both racks averaged; CPU per process from /proc.

Run (root): .venv/bin/python bench/allreduce_net.py [--sizes 4,16] [--mbit 25,100] [--repeat 2]
     [--modes gloo,in-network,two-jobs] [--spines 2 [--uplink-ratio 0.5]]
The last line is the geometric mean over the sizes at the first rate (ours/gloo); with two
spines the line before it compares multipath with single path the same way.
The gloo peer needs torch: pip install -e .[bench]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import ipaddress
import json
import os
import platform
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from apps.procs import Child, ProcessGroup  # noqa: E402
from apps.scenario.netns import NetnsBackend  # noqa: E402
from apps.scenario.runs import run_command  # noqa: E402
from apps.scenario.schema import LinkSpec, NodeSpec, Scenario  # noqa: E402
from bench.allreduce import (  # noqa: E402
    CHILD_ENV,
    BenchError,
    Reference,
    Worker,
    all_request,
    check,
    cpu_seconds,
    references,
    start_worker,
)
from bench.allreduce_worker import JOB, MiB, plan_json, run  # noqa: E402
from bench.arguments import parse_choices, parse_ints  # noqa: E402
from compute.collective import Plan  # noqa: E402
from icn.dataplane import mgmt_client  # noqa: E402
from icn.dataplane.endpoint import Endpoint  # noqa: E402
from icn.wire import tlv_types as T  # noqa: E402

RACKS = ("ra", "rb")
SPINE = "spine"  # the first spine's namespace, and the role of the root aggregator in the plan
SPINES = (SPINE, "spine2")
PORT = 6363  # the forwarders' TCP port in every namespace
GLOO_PORT = 29500
TWO_JOBS = "two-jobs"
MULTIPATH = "multipath"
MODES = ("gloo", "in-network", TWO_JOBS, MULTIPATH)
MULTIPATH_STRATEGY = "/localhost/nfd/strategy/multipath/v=1"


@dataclass
class Fabric:
    """The namespaces, links, IP routes and shaping of one run."""

    per_rack: int
    uplink_ratio: float
    run_dir: Path
    n_spines: int = 1
    backend: NetnsBackend = field(init=False)
    scenario: Scenario = field(init=False)

    def __post_init__(self) -> None:
        nodes = [*self.spines(), *RACKS, *self.workers()]
        links = [LinkSpec(between=(w, self.rack_of(w)), transport="tcp") for w in self.workers()]
        # rack by rack, in spine order: the links' (and addresses') order is the same each run
        links += [
            LinkSpec(between=(rack, spine), transport="tcp")
            for rack in RACKS
            for spine in self.spines()
        ]
        self.scenario = Scenario(
            name="allreduce-net",
            backend="netns",
            nodes={n: NodeSpec() for n in nodes},
            links=links,
        )
        self.backend = NetnsBackend(self.scenario, secrets.token_hex(3), self.run_dir)

    # ---- naming ----------------------------------------------------------------------------

    def spines(self) -> tuple[str, ...]:
        return SPINES[: self.n_spines]

    def workers(self) -> list[str]:
        return [f"w{i}" for i in range(self.per_rack * len(RACKS))]

    def rack_of(self, worker: str) -> str:
        return RACKS[int(worker[1:]) // self.per_rack]

    def link(self, a: str, b: str) -> LinkSpec:
        link = self.scenario.link_between(a, b)
        assert link is not None, (a, b)
        return link

    def addr(self, node: str, toward: str) -> str:
        """``node``'s address on its link to ``toward``."""
        return self.backend.address_on(self.link(node, toward), node)

    def ifname(self, node: str, toward: str) -> str:
        return self.backend.interface_on(self.link(node, toward), node)

    def ns(self, node: str) -> str:
        return self.backend.namespaces[node]

    def network(self) -> str:
        """The /16 every link's /30 lies in."""
        first = self.backend.addresses[0][0]
        return str(ipaddress.ip_network(f"{first}/16", strict=False))

    # ---- life ------------------------------------------------------------------------------

    def setup(self) -> None:
        if shutil.which("tc") is None:
            raise BenchError("tc (iproute2) is needed to shape the links: apt-get install iproute2")
        self.backend.setup()
        for node in (SPINE, *RACKS):
            sysctl = ["sysctl", "-qw", "net.ipv4.ip_forward=1"]
            run_command(["ip", "netns", "exec", self.ns(node), *sysctl])
        for w in self.workers():
            rack = self.rack_of(w)
            gateway = self.addr(rack, w)
            run_command(["ip", "-n", self.ns(w), "route", "add", "default", "via", gateway])
            subnet = ipaddress.ip_interface(f"{self.addr(w, rack)}/30").network
            via = self.addr(rack, SPINE)
            run_command(["ip", "-n", self.ns(SPINE), "route", "add", str(subnet), "via", via])
        for rack in RACKS:
            via = self.addr(SPINE, rack)
            run_command(["ip", "-n", self.ns(rack), "route", "add", "default", "via", via])

    def shape_links(self, mbit: float) -> None:
        """Worker links at ``mbit``, uplinks at ``uplink_ratio`` times that, both directions."""
        for link in self.scenario.links:
            a, b = link.between
            uplink = any(spine in link.between for spine in self.spines())
            rate = mbit * self.uplink_ratio if uplink else mbit
            for node, peer in ((a, b), (b, a)):
                self.shape(node, self.ifname(node, peer), rate)

    def shape(self, node: str, ifname: str, mbit: float) -> None:
        # a token bucket of 2 ms of the rate (at least 32 KiB, more than one TSO burst of a
        # veth); packets wait at most 50 ms in its queue, then are dropped as on a real link
        burst = max(32 << 10, int(mbit * 1e6 / 8 * 0.002))
        tbf = ["tbf", "rate", f"{mbit}mbit", "burst", str(burst), "latency", "50ms"]
        run_command(["tc", "-n", self.ns(node), "qdisc", "replace", "dev", ifname, "root", *tbf])

    def teardown(self) -> None:
        self.backend.teardown()

    def argv(self, node: str, argv: list[str]) -> list[str]:
        return self.backend.argv_for(node, argv)

    def tcp_retransmissions(self) -> int:
        """TCP segments re-sent so far, all namespaces together (their /proc/net/snmp)."""
        total = 0
        for node in self.scenario.nodes:
            text = run_command(["ip", "netns", "exec", self.ns(node), "cat", "/proc/net/snmp"])
            head, values = [ln.split() for ln in text.splitlines() if ln.startswith("Tcp:")][:2]
            total += int(values[head.index("RetransSegs")])
        return total

    def uplink_bytes(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Per rack and spine: bytes the uplink's rack end has sent (up) and received (down)."""
        out = {}
        for rack in RACKS:
            for spine in self.spines():
                dev = self.ifname(rack, spine)
                argv = ["ip", "-n", self.ns(rack), "-j", "-s", "link", "show", "dev", dev]
                stats = json.loads(run_command(argv))[0]["stats64"]
                out[rack, spine] = (int(stats["tx"]["bytes"]), int(stats["rx"]["bytes"]))
        return out


def tree_plan(fabric: Fabric, job: str = JOB) -> Plan:
    """Rack aggregators over their workers, the spine over the racks (workers named by rank)."""
    ranks = [w[1:] for w in fabric.workers()]
    children: dict[str, tuple[str, ...]] = {SPINE: RACKS}
    for rack in RACKS:
        children[rack] = tuple(w[1:] for w in fabric.workers() if fabric.rack_of(w) == rack)
    return Plan(job, tuple(ranks), SPINE, children)


@dataclass
class Cell:
    rounds: list[float]  # per timed round, the slowest worker's time (of any job)
    up: float  # bytes per round per uplink, rack to spine (both racks averaged)
    down: float
    cpu: dict[str, float]  # CPU seconds per round: forwarders, workers
    retx: float = 0.0  # TCP segments re-sent per round, all namespaces
    jobs: list[float] = field(default_factory=list)  # two jobs at once: each one's median
    paths: list[float] = field(default_factory=list)  # two spines: each one's share of bytes

    @property
    def seconds(self) -> float:
        return statistics.median(self.rounds)


async def start_forwarders(
    fabric: Fabric,
    plans: list[Path],
    group: ProcessGroup,
    workdir: Path,
    chunk_bytes: int,
    lifetime_ms: int,
    profile: Path | None,
    multipath: bool = False,
) -> dict[str, Child]:
    """A forwarder in each spine and each rack, with an aggregator of each plan in it (each
    spine runs the plan's root); faces and routes up.  The racks route the jobs' sum to the
    first spine only, or with ``multipath`` to every spine, spread by the multipath strategy."""
    hosts: dict[str, Child] = {}
    socks: dict[str, Path] = {}
    jobs = [json.loads(path.read_text())["job"] for path in plans]
    for node in (*fabric.spines(), *RACKS):
        socks[node] = fabric.backend.unix_socket(node)
        config: dict[str, Any] = {
            "listen": {"tcp": [f"0.0.0.0:{PORT}"], "unix": str(socks[node])},
            # the workers register their prefixes from their namespaces
            "local_networks": ["127.0.0.0/8", fabric.network()],
            "log_level": "info",
            # chunks above 8 KiB: jumbo packets on the fabric's TCP faces (every forwarder here
            # is set alike), with room for a chunk's name, header and signature
            "tcp_max_packet": max(T.MAX_PACKET_SIZE, chunk_bytes + 4096),
        }
        if multipath and node in RACKS:
            config["strategies"] = [
                {"prefix": f"{job}/sum", "strategy": MULTIPATH_STRATEGY} for job in jobs
            ]
        path = workdir / f"{node}.json"
        path.write_text(json.dumps(config))
        argv = [sys.executable, "-m", "bench.allreduce_host", "--config", str(path)]
        for plan_path in plans:
            argv += ["--plan", str(plan_path)]
        role = SPINE if node in fabric.spines() else node  # every spine: a copy of the root
        argv += ["--node", role, "--lifetime-ms", str(lifetime_ms)]
        # a slow worker is waited for: the benchmark measures, its deadline catches the dead
        argv += ["--member-timeout", "300"]
        if profile is not None and node == RACKS[0]:
            argv += ["--profile", str(profile / f"fwd-{node}.prof")]
        hosts[node] = group.start(node, fabric.argv(node, argv), CHILD_ENV)
    for child in hosts.values():
        child.wait_for("ready face=", timeout=30, stream="stdout")
    eps = {node: await Endpoint.connect(f"unix://{sock}") for node, sock in socks.items()}
    try:
        for rack in RACKS:
            ups = []
            for spine in fabric.spines():
                # the rack's Interests for the sum go up; the spine's for the rack's partial
                # come down: one TCP connection each way, each made by the side that sends
                # Interests
                ups.append(await face_to(eps[rack], fabric.addr(spine, rack)))
                down = await face_to(eps[spine], fabric.addr(rack, spine))
                for job in jobs:
                    await register(eps[spine], f"{job}/agg/{rack}", down)
                    # the spine reaches the rack's workers too, for a bypass of the rack
                    for w in fabric.workers():
                        if fabric.rack_of(w) == rack:
                            await register(eps[spine], f"{job}/w/{w[1:]}", down)
            # multipath: the sum prefix on every uplink at one cost, spread by chunk over the
            # faces in face id order, which must be the spines' order at every rack for both
            # racks to send a chunk to the same root.  Single path: the first spine only (with
            # both routes, best-route sends an Interest that reaches the rack more than 10 ms
            # after another worker's for the same chunk on to the other spine, as a
            # retransmission, and that spine's root sums the chunk again: 13-20 % of the
            # uplink bytes went there in a run at 25 and 100 Mbit/s)
            if ups != sorted(ups):
                raise BenchError(f"rack {rack}: faces to the spines out of order ({ups})")
            for job in jobs:
                for up in ups if multipath else ups[:1]:
                    await register(eps[rack], f"{job}/sum", up)
    finally:
        for ep in eps.values():
            ep.close()
    return hosts


async def face_to(ep: Endpoint, addr: str) -> int:
    body = await mgmt_client.command(ep, "faces", "create", uri=f"tcp4://{addr}:{PORT}")
    return int(body["face_id"])


async def register(ep: Endpoint, prefix: str, face_id: int) -> None:
    await mgmt_client.command(ep, "rib", "register", name=prefix, face_id=face_id)


async def run_mode(
    mode: str,
    fabric: Fabric,
    refs: dict[int, Reference],
    args: argparse.Namespace,
    workdir: Path,
) -> dict[int, Cell]:
    """All sizes of ``mode`` on the current link rates: one set of processes."""
    d = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=workdir))
    group = ProcessGroup(d)
    jobs: list[list[Worker]] = []
    try:
        hosts: dict[str, Child] = {}
        n = len(fabric.workers())
        base = [sys.executable, "-m", "bench.allreduce_worker", "--world", str(n)]
        base += ["--deadline", str(args.timeout)]
        plans: list[Path] = []
        if mode != "gloo":
            # two jobs at once: the second's names under /ar2, the same racks, aggregators
            # and links
            for j in range(2 if mode == TWO_JOBS else 1):
                plans.append(d / f"plan{j}.json")
                plans[-1].write_text(plan_json(tree_plan(fabric, JOB + (str(j + 1) if j else ""))))
            profile = Path(args.profile).resolve() if args.profile else None
            chunk = args.chunk_kib * 1024
            life = args.lifetime_ms
            hosts = await start_forwarders(
                fabric, plans, group, d, chunk, life, profile, multipath=mode == MULTIPATH
            )
            base += ["--chunk-kib", str(args.chunk_kib), "--window", str(args.window)]
            base += ["--lifetime-ms", str(life)]
        for j, plan_path in enumerate(plans or [None]):
            workers: list[Worker] = []
            for rank, w in enumerate(fabric.workers()):
                rack = fabric.rack_of(w)
                env: dict[str, str] = {}
                if plan_path is None:
                    init = f"tcp://{fabric.addr('w0', fabric.rack_of('w0'))}:{GLOO_PORT}"
                    argv = [*base, "--rank", str(rank), "--init", init, "gloo"]
                    env["GLOO_SOCKET_IFNAME"] = fabric.ifname(w, rack)
                else:
                    uri = f"tcp4://{fabric.addr(rack, w)}:{PORT}"
                    argv = [*base, "--rank", str(rank), "--connect", uri, "--plan", str(plan_path)]
                    if args.profile and rank == 0 and j == 0:
                        argv += ["--profile", str(Path(args.profile).resolve() / "w0.prof")]
                    argv.append("ours")
                name = f"{mode}-j{j}-{w}"
                workers.append(await start_worker(name, fabric.argv(w, argv), d, env))
            jobs.append(workers)
        everyone = [w for workers in jobs for w in workers]
        await asyncio.gather(*(w.recv(args.timeout) for w in everyone))
        pids = {f"fwd-{node}": child.pid for node, child in hosts.items()}
        cells = {}
        for mib in args.sizes:
            cells[mib] = await measure(mode, mib, fabric, jobs, pids, refs[mib], args)
        await all_request(everyone, {"cmd": "quit"}, args.timeout)
        return cells
    finally:
        await asyncio.gather(*(w.stop() for ws in jobs for w in ws), return_exceptions=True)
        group.stop_all()
        if args.keep:
            print(f"  logs kept in {d}", file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)


async def measure(
    mode: str,
    mib: int,
    fabric: Fabric,
    jobs: list[list[Worker]],
    pids: dict[str, int],
    ref: Reference,
    args: argparse.Namespace,
) -> Cell:
    """One size: every job's warm-up, then the timed rounds, all jobs at once."""
    kind = "gloo" if mode == "gloo" else "in-network"  # what check() compares with

    async def each(cmd: dict[str, Any]) -> list[list[dict[str, Any]]]:
        return list(await asyncio.gather(*(all_request(ws, cmd, args.timeout) for ws in jobs)))

    for replies in await each({"cmd": "warm", "mib": mib}):
        check(kind, mib, ref, replies)
    link0, retx0 = fabric.uplink_bytes(), fabric.tcp_retransmissions()
    cpu0 = {role: sum(cpu_seconds(pid)) for role, pid in pids.items()}
    timed = await each({"cmd": "time", "repeat": args.repeat})
    cpu1 = {role: sum(cpu_seconds(pid)) for role, pid in pids.items()}
    link1, retx1 = fabric.uplink_bytes(), fabric.tcp_retransmissions()
    per_job = []
    for replies in timed:
        check(kind, mib, ref, replies)
        per_job.append([max(t) for t in zip(*(r["times"] for r in replies), strict=True)])
    rounds = [max(ts) for ts in zip(*per_job, strict=True)]
    moved = {key: (link1[key][0] - link0[key][0], link1[key][1] - link0[key][1]) for key in link0}
    up = sum(u for u, _ in moved.values()) / len(RACKS) / args.repeat
    down = sum(d for _, d in moved.values()) / len(RACKS) / args.repeat
    spines = fabric.spines()
    per_spine = [sum(sum(moved[r, spine]) for r in RACKS) for spine in spines]
    paths = [b / max(1, sum(per_spine)) for b in per_spine] if len(spines) > 1 else []
    cpu = {"fwd": sum(cpu1[k] - cpu0[k] for k in pids) / args.repeat}
    cpu["workers"] = sum(r["cpu"] for replies in timed for r in replies) / args.repeat
    each_job = [statistics.median(ts) for ts in per_job] if len(jobs) > 1 else []
    cell = Cell(rounds, up, down, cpu, (retx1 - retx0) / args.repeat, each_job, paths)
    print(
        f"  {mib} MiB {mode}: {cell.seconds:.2f} s (rounds: "
        f"{', '.join(f'{t:.2f}' for t in rounds)}), uplink up {up / MiB:.1f} MiB down "
        f"{down / MiB:.1f} MiB{split_text(paths)}",
        file=sys.stderr,
        flush=True,
    )
    return cell


def split_text(paths: list[float]) -> str:
    """Each spine's share of the uplink bytes, e.g. ", spines 50/50 %" (nothing for one)."""
    if not paths:
        return ""
    return ", spines " + "/".join(f"{100 * p:.0f}" for p in paths) + " %"


def print_table(cells: dict[tuple[float, int], dict[str, Cell]], n_spines: int) -> None:
    head = (
        f"{'Mbit/s':>6} {'size':>6}  {'mode':<10} | {'s':>6} {'/ gloo':>6} | "
        f"{'uplink MiB: up':>14} {'down':>5} {'retx':>6} | {'cpu s: fwd':>10} {'workers':>7}"
    )
    print(head)
    print("-" * len(head))
    for (mbit, mib), row in cells.items():
        gloo = row.get("gloo")
        for mode in MODES:
            c = row.get(mode)
            if c is None:
                continue
            ratio = f"{c.seconds / gloo.seconds:>6.2f}" if gloo and mode != "gloo" else " " * 6
            fwd = f"{c.cpu['fwd']:.2f}" if mode != "gloo" else "-"
            alone = row.get("in-network")
            jobs = ""
            if c.jobs and alone is not None:
                jobs = "  each job / alone: " + ", ".join(
                    f"{t / alone.seconds:.2f}" for t in c.jobs
                )
            single = row.get("in-network")
            if mode == MULTIPATH and single is not None:
                jobs += f"  / single path: {c.seconds / single.seconds:.2f}"
            print(
                f"{mbit:>6g} {f'{mib} MiB':>6}  {mode:<10} | {c.seconds:>6.2f} {ratio} | "
                f"{c.up / MiB:>14.1f} {c.down / MiB:>5.1f} {c.retx:>6.0f} | {fwd:>10} "
                f"{c.cpu['workers']:>7.2f}"
                f"{jobs}{split_text(c.paths)}"
            )
    print(
        "Mbit/s: each worker link's rate; s: median over rounds of the slowest worker's time;\n"
        "  / gloo: time ratio, below 1 favours ours\n"
        "uplink MiB: bytes per allreduce on a rack's uplink (IP and TCP headers included),\n"
        "  from the rack end's interface counters, both racks averaged; retx: TCP segments\n"
        "  re-sent per allreduce in all namespaces (their /proc/net/snmp)\n"
        "cpu s: CPU time per allreduce of the forwarders (aggregators in them) and of\n"
        "  all workers' allreduce calls\n"
        f"{TWO_JOBS}: two jobs (8 workers each, one per namespace) at once over the same\n"
        "  aggregators and links; s is the slower job's, bytes and CPU are both jobs' together,\n"
        "  'each job / alone' each job's median time over in-network's"
    )
    if n_spines > 1:
        print(
            "two spines: uplink MiB counts both of a rack's uplinks; 'spines a/b %' each\n"
            "  spine's share of the uplink bytes; in-network: the sum routed to the first\n"
            f"  spine only (single path); {MULTIPATH}: the racks spread the sum's chunks\n"
            "  over both spines by chunk name, '/ single path' its time over in-network's"
        )


async def main(args: argparse.Namespace, fabric: Fabric, workdir: Path) -> None:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    plan = tree_plan(fabric)
    n = len(plan.workers)
    n_spines = len(fabric.spines())
    started = time.monotonic()
    refs = references(n, args.sizes, plan)
    # which namespaces are this run's (tests look for leftovers of this run only)
    print(f"namespaces: icn-{fabric.backend.run_id}-*", file=sys.stderr, flush=True)
    fabric.setup()
    cells: dict[tuple[float, int], dict[str, Cell]] = {}
    for mbit in args.mbit:
        fabric.shape_links(mbit)
        for mode in args.modes:
            for mib, cell in (await run_mode(mode, fabric, refs, args, workdir)).items():
                cells.setdefault((mbit, mib), {})[mode] = cell
    peer = ""
    if "gloo" in args.modes:
        import torch

        peer = f", torch {torch.__version__}"
    over = args.per_rack / args.uplink_ratio / n_spines
    spines = f" and {n_spines} spines" if n_spines > 1 else ""
    uplinks = f"{n_spines} uplinks per rack" if n_spines > 1 else "uplinks"
    print(
        f"allreduce (sum) of float32 among {n} workers in 2 racks{spines}, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores{peer}\n"
        f"links: tc tbf in both directions, {uplinks} at {args.uplink_ratio:g}x a worker link's "
        f"rate ({over:g}:1 oversubscribed)\n"
        f"ours: TCP faces, chunks of {args.chunk_kib} KiB (one packet each), window "
        f"{args.window}, Interest lifetime {args.lifetime_ms} ms, an aggregator in each "
        f"forwarder; gloo: its ring over TCP\n"
        f"1 warm-up and {args.repeat} timed allreduces per cell, all verified; run took "
        f"{time.monotonic() - started:.0f} s"
    )
    print_table(cells, n_spines)
    first = args.mbit[0]
    split = [
        row[MULTIPATH].seconds / row["in-network"].seconds
        for (mbit, _), row in cells.items()
        if mbit == first and MULTIPATH in row and "in-network" in row
    ]
    if split:
        ratio = statistics.geometric_mean(split)
        print(f"net: multipath/single-path time ratio: {ratio:.2f} (at {first:g} Mbit/s)")
    ratios = [
        row["in-network"].seconds / row["gloo"].seconds
        for (mbit, _), row in cells.items()
        if mbit == first and "in-network" in row and "gloo" in row
    ]
    if ratios:
        ratio = statistics.geometric_mean(ratios)
        print(f"net: ours/gloo time ratio: {ratio:.2f} (at {first:g} Mbit/s)")


def parse_rates(text: str) -> list[float]:
    try:
        rates = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        rates = []
    if not rates or min(rates) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: write rates in Mbit/s separated by commas")
    return rates


parse_modes = parse_choices(MODES)


def preflight(modes: list[str]) -> Iterator[str]:
    """What this machine lacks for the benchmark, as messages naming the fix."""
    if os.geteuid() != 0:
        yield "run as root: the benchmark creates network namespaces and shapes veth links"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            yield f"the '{tool}' command is missing: apt-get install iproute2"
    if "gloo" in modes and importlib.util.find_spec("torch") is None:
        yield "the gloo peer needs torch: pip install -e .[bench] (or --modes in-network)"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=parse_ints, default=[4, 16], help="MiB of float32")
    ap.add_argument("--mbit", type=parse_rates, default=[25.0], help="worker link rates, Mbit/s")
    ap.add_argument("--uplink-ratio", type=float, default=1.0, help="uplink rate / worker link")
    ap.add_argument("--per-rack", type=int, default=4, help="workers per rack")
    ap.add_argument("--repeat", type=int, default=2, help="timed allreduces per cell")
    ap.add_argument("--chunk-kib", type=int, default=64, help="ours: KiB per chunk (one packet)")
    ap.add_argument("--window", type=int, default=8, help="ours: chunks in flight per worker")
    ap.add_argument(
        "--lifetime-ms",
        type=int,
        default=4000,
        help="ours: Interest lifetime of workers and aggregators (a queue of 1 MiB takes a third "
        "of a second to cross a 25 Mbit/s link)",
    )
    ap.add_argument(
        "--modes",
        type=parse_modes,
        help=f"{','.join(MODES)} (default: all but {MULTIPATH}; with --spines 2, all but "
        f"{TWO_JOBS})",
    )
    ap.add_argument(
        "--spines",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: a second spine, each rack an uplink to each (the multipath variant)",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per command at most")
    ap.add_argument("--keep", action="store_true", help="keep the processes' logs")
    ap.add_argument("--profile", help="directory for cProfiles of rack ra's forwarder and w0")
    args = ap.parse_args()
    if args.uplink_ratio <= 0:
        ap.error("--uplink-ratio: must be positive, e.g. 1 (uplink as fast as a worker link)")
    if args.modes is None:
        skip = TWO_JOBS if args.spines > 1 else MULTIPATH
        args.modes = [m for m in MODES if m != skip]
    if MULTIPATH in args.modes and args.spines < 2:
        ap.error(f"--modes {MULTIPATH}: needs two paths, add --spines 2")
    missing = list(preflight(args.modes))
    if missing:
        sys.exit("cannot run:\n  " + "\n  ".join(missing))
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-allreduce-net-"))
    fabric = Fabric(args.per_rack, args.uplink_ratio, workdir, args.spines)
    # SIGTERM like ^C: every exit path below tears the namespaces down
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        run(main(args, fabric, workdir))
    except BenchError as exc:
        sys.exit(f"FAILED: {exc}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        sys.exit("interrupted; processes stopped, namespaces and temporary files removed")
    finally:
        fabric.teardown()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
