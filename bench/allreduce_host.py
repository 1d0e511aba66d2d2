"""The root aggregator of bench/allreduce.py, in the forwarder's process or as its own process.

  --unix PATH     run a forwarder daemon (the one ``icn fwd`` runs) listening on PATH, and the
                  aggregator in the same process and loop, on an in-memory face
                  (apps.inproc.attach_endpoint): the in-network mode
  --connect URI   no forwarder: the aggregator alone, over a Unix socket to one (parameter
                  server mode)
  --config FILE   like --unix, with the forwarder's whole config from FILE (YAML or JSON;
                  bench/allreduce_net.py: TCP listeners in a network namespace)
  --plan FILE     the plan (bench.allreduce_worker.plan_json), and --node the aggregator
                  this process runs; default: the flat plan of --workers, its root.  Given
                  more than once: an aggregator for each plan (jobs sharing the process)
Prints ``ready face=ID`` on stdout once the aggregator serves /ar/sum (ID is its face in the
forwarder, whose counters the bench reads), stops on SIGTERM or SIGINT and then prints
``aggregator counters: {...}``.  ``--profile FILE`` writes a cProfile of the whole process.
Run from the repository root (the bench does this):
    python -m bench.allreduce_host --unix /tmp/f.sock --workers 4
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import signal
import sys
import time

from apps.inproc import attach_endpoint
from bench.allreduce_worker import load_plan, run
from compute.collective import Aggregator
from forwarder.config import config_from_dict, load_config
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint
from icn.log import setup_logging


async def main(args: argparse.Namespace) -> None:
    daemon: ForwarderDaemon | None = None
    stop = asyncio.Event()
    if args.unix or args.config:
        setup_logging("info")
        if args.config:
            config = load_config(args.config)
        else:
            config = config_from_dict({"listen": {"unix": args.unix}, "log_level": "info"})
        daemon = ForwarderDaemon(config)
        await daemon.start()  # SIGTERM and SIGINT now stop the daemon
        ep = attach_endpoint(daemon, label="aggregator")
    else:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        ep = await Endpoint.connect(args.connect)
    plans = [load_plan(path, args.workers) for path in args.plan or [None]]
    node = args.node
    options = {
        "lifetime_ms": args.lifetime_ms,
        "member_timeout": args.member_timeout,
        "bypass_after": args.bypass_after,
        "signature": args.signature,
        "shared": args.payloads == "shared",
    }
    aggs = [Aggregator(p, node or p.root, ep, **options) for p in plans]
    try:
        for agg in aggs:
            await agg.start()
        print(f"ready face={ep.face_id}", flush=True)
        stopped = daemon.wait_stopped() if daemon else stop.wait()
        waits = {asyncio.ensure_future(ep.wait_closed()), asyncio.ensure_future(stopped)}
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
    finally:
        for agg in aggs:
            print("aggregator counters: " + json.dumps(agg.stats(), sort_keys=True), flush=True)
            await agg.close()
        ep.close()
        if daemon is not None:
            await daemon.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--unix", help="run a forwarder listening on this Unix socket path")
    where.add_argument("--connect", help="forwarder URI to join, e.g. unix:///tmp/fwd.sock")
    where.add_argument("--config", help="run a forwarder with this config file (YAML or JSON)")
    ap.add_argument("--workers", type=int, default=0, help="workers in the flat plan")
    ap.add_argument("--signature", default="digest", help="chunks' signature: digest or null")
    ap.add_argument(
        "--payloads",
        choices=["packets", "shared"],
        default="packets",
        help="sums in the packets, or in shared memory referred to by them (one host)",
    )
    ap.add_argument(
        "--plan", action="append", help="the plan's JSON file instead of the flat plan (repeatable)"
    )
    ap.add_argument("--node", help="with --plan: the aggregator to run (default: the root)")
    ap.add_argument("--lifetime-ms", type=int, default=1000, help="its pulls' Interest lifetime")
    ap.add_argument(
        "--member-timeout", type=float, default=30.0, help="seconds a child may keep it waiting"
    )
    ap.add_argument(
        "--bypass-after",
        type=float,
        default=2.0,
        help="seconds before a silent child aggregator is bypassed",
    )
    ap.add_argument("--profile", help="write a cProfile of this process to this file")
    args = ap.parse_args()
    if args.plan is None and args.workers < 1:
        ap.error("--workers N (the flat plan's size) or --plan FILE is required")
    # CPU time, not wall time: nine processes share two cores, so waits would blur the split
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    if profiler is not None:
        profiler.enable()
    try:
        run(main(args))
    except KeyboardInterrupt:
        sys.exit(0)
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
