"""The RMI server process of bench/rmi.py: serves bench/rmi_funcs.py through a forwarder.

Prints ``ready LOOP`` on stdout once its prefix is registered (LOOP: the running loop, uvloop
or asyncio), stops on SIGTERM or SIGINT and then prints its counters.  Run from the repository
root:
    python -m bench.rmi_server --connect unix:///tmp/fwd.sock --prefix /bench
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

from bench import rmi_funcs
from bench.loops import running
from compute.rmi import RmiServer, ServerConfig, collect
from icn.dataplane.endpoint import Endpoint


async def main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ep = await Endpoint.connect(args.connect)
    server = RmiServer(
        ep, args.prefix, collect(rmi_funcs), config=ServerConfig(max_jobs=args.max_jobs)
    )
    try:
        await server.start()
        print(f"ready {running()}", flush=True)
        closed = asyncio.ensure_future(ep.wait_closed())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({closed, stopping}, return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()
        stopping.cancel()
    finally:
        await server.close()
        ep.close()
    print("rmi server counters: " + json.dumps(dict(server.counters), sort_keys=True), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--connect", required=True, help="forwarder URI, e.g. unix:///tmp/fwd.sock")
    ap.add_argument("--prefix", default="/bench", help="name prefix to serve under")
    ap.add_argument("--max-jobs", type=int, default=1024, help="calls in progress at most")
    args = ap.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    run(main(args))
