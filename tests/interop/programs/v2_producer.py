"""appv2 ``ndn.appv2.NDNApp`` producer: ``@app.route(PREFIX)`` replies to every Interest under
PREFIX with a Data named as the Interest whose Content is the bytes of FILE (DigestSha256).

Prints ``ready PREFIX`` once the route is registered (appv2 registers ``@app.route`` prefixes
before ``after_start``), then ``served NAME`` per Interest.  Runs until SIGTERM, or exits on its
own after --max-seconds (a bound in case nobody stops it).
"""

from __future__ import annotations

import argparse
import logging
import signal

from ndn.appv2 import NDNApp, PktContext, ReplyFunc
from ndn.encoding import BinaryStr, FormalName, Name
from ndn.security import DigestSha256Signer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("prefix")
    parser.add_argument("content_file")
    parser.add_argument("--freshness-ms", type=int, default=1000)
    parser.add_argument("--max-seconds", type=int, default=120)
    args = parser.parse_args()
    signal.alarm(args.max_seconds)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with open(args.content_file, "rb") as f:
        content = f.read()

    app = NDNApp()
    signer = DigestSha256Signer()

    @app.route(args.prefix)
    def on_interest(
        name: FormalName, _param: BinaryStr | None, reply: ReplyFunc, _ctx: PktContext
    ) -> None:
        reply(app.make_data(name, content, signer, freshness_period=args.freshness_ms))
        print(f"served {Name.to_str(name)}", flush=True)

    async def after_start() -> None:
        print(f"ready {args.prefix}", flush=True)

    app.run_forever(after_start=after_start())


if __name__ == "__main__":
    main()
