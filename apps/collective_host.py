"""A forwarder with a collective job's aggregator in its process: the network a job brings
along when it has none (the torch backend's rank 0 starts one, ``apps/torch_backend.py``).

    python -m apps.collective_host --unix /tmp/job/fwd.sock --plan plan.json [--node NAME]

The forwarder (the daemon ``icn fwd`` runs) listens on the Unix socket; the aggregator runs on an
in-memory face in the same loop, so a chunk crosses no socket between the forwarder and the
aggregator.  Prints ``ready`` once the aggregator serves its prefix.  Stops on SIGTERM, SIGINT,
or when its standard input closes: the process that started it holds the other end, so the
forwarder does not outlive it even when that process is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from pathlib import Path

from apps.inproc import attach_endpoint
from apps.loop import run_loop
from compute.collective import Aggregator, Plan
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.errors import IcnError
from icn.log import setup_logging


async def _stdin_closed() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):
        pass


async def serve(args: argparse.Namespace) -> None:
    plan = Plan.from_dict(json.loads(Path(args.plan).read_text()))
    setup_logging(args.log_level)
    config = config_from_dict({"listen": {"unix": args.unix}, "log_level": args.log_level})
    daemon = ForwarderDaemon(config)
    await daemon.start()  # SIGTERM and SIGINT now stop the daemon
    ep = attach_endpoint(daemon, label="aggregator")
    agg = Aggregator(
        plan,
        args.node or plan.root,
        ep,
        lifetime_ms=args.lifetime_ms,
        member_timeout=args.member_timeout,
        signature=args.signature,
        shared=args.payloads == "shared",
    )
    try:
        await agg.start()
        print("ready", flush=True)
        waits = {
            asyncio.ensure_future(daemon.wait_stopped()),
            asyncio.ensure_future(_stdin_closed()),
        }
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
    finally:
        await agg.close()
        ep.close()
        await daemon.stop()
        if args.remove_dir:
            # the starter may have been killed (SIGTERM from a launcher): its files go with us
            shutil.rmtree(args.remove_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--unix", required=True, help="the forwarder's Unix socket path")
    ap.add_argument("--plan", required=True, help="the job's plan (JSON of Plan.to_dict())")
    ap.add_argument("--node", help="the aggregator to run (default: the plan's root)")
    ap.add_argument("--lifetime-ms", type=int, default=1000, help="its pulls' Interest lifetime")
    ap.add_argument(
        "--member-timeout",
        type=float,
        default=30.0,
        help="seconds a worker may keep a round waiting before the round fails naming it",
    )
    ap.add_argument(
        "--signature",
        default="digest",
        help="the sums' signature: digest (DigestSha256) or null (links that keep bytes intact)",
    )
    ap.add_argument(
        "--payloads",
        choices=["packets", "shared"],
        default="packets",
        help="the sums in the packets, or in shared memory the packets refer to (workers on "
        "this host only)",
    )
    ap.add_argument("--remove-dir", help="a directory (the starter's files) to remove on exit")
    ap.add_argument("--log-level", default="warning", help="the forwarder's log level")
    args = ap.parse_args()
    try:
        run_loop(serve(args))
    except KeyboardInterrupt:
        pass
    except (IcnError, OSError, ValueError) as exc:
        sys.exit(f"collective host: {exc}")


if __name__ == "__main__":
    main()
