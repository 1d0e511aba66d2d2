"""One member of a python-ndn State Vector Sync group (``ndn.app_support.svs.SvsInst``, appv2).

Joins GROUP (registers it and attaches the SVS handler), publishes sequence numbers 1..COUNT as
NODE (``new_data``, one every --interval seconds), and waits until its state vector holds, for
every ``PEER=SEQ`` given with --expect, at least SEQ.  Then prints ``converged {json state
vector}`` and keeps syncing (so slower members still learn its state) until SIGTERM or
--max-seconds.  Exits 1 with ``result FAIL ...`` if it has not converged within --timeout.
Sync Interests are signed with DigestSha256 (SVS needs a signed Interest); periodic sync runs
every --sync-interval seconds so a member that joined late catches up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import time

from ndn.app_support.svs import SvsInst
from ndn.appv2 import NDNApp, pass_all
from ndn.encoding import Name
from ndn.security import DigestSha256Signer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("group")
    parser.add_argument("node")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--expect", action="append", default=[], metavar="PEER=SEQ")
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--sync-interval", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--max-seconds", type=int, default=120)
    args = parser.parse_args()
    signal.alarm(args.max_seconds)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    expect = {}
    for item in args.expect:
        peer, _, seq = item.partition("=")
        expect[Name.to_bytes(peer)] = int(seq)

    app = NDNApp()
    changed = asyncio.Event()

    def on_missing(inst: SvsInst) -> None:
        changed.set()

    svs = SvsInst(
        args.group,
        args.node,
        on_missing,
        DigestSha256Signer(for_interest=True),
        pass_all,
        sync_interval=args.sync_interval,
    )
    outcome: list[str] = []

    def state() -> dict[str, int]:
        return {Name.to_str(Name.from_bytes(k)): v for k, v in svs.local_sv.items()}

    def converged() -> bool:
        return all(svs.local_sv.get(peer, 0) >= seq for peer, seq in expect.items())

    async def run() -> None:
        try:
            svs.start(app)
            if not await app.register(args.group):
                outcome.append(f"could not register {args.group}")
                app.shutdown()
                return
            print(f"ready {args.node} in {args.group}", flush=True)
            for _ in range(args.count):
                seq = svs.new_data()
                print(f"published {args.node} seq={seq}", flush=True)
                await asyncio.sleep(args.interval)
            deadline = time.monotonic() + args.timeout
            while not converged():
                left = deadline - time.monotonic()
                if left <= 0:
                    outcome.append(f"not converged within {args.timeout} s: {state()}")
                    app.shutdown()
                    return
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(left, 0.5))
            print("converged " + json.dumps(state(), sort_keys=True), flush=True)
            # keep answering sync Interests until stopped
        except Exception as exc:  # report, then exit non-zero
            outcome.append(f"error: {exc!r}")
            app.shutdown()

    app.run_forever(after_start=run())
    if outcome:
        print("result FAIL " + "; ".join(outcome), flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
