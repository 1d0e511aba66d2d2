"""v1 ``ndn.app.NDNApp`` producer: ``@app.route(PREFIX)`` answers every Interest under PREFIX
with the bytes of FILE (Data named as the Interest, signed with the PIB's default key).

Prints ``ready PREFIX`` once the route is registered (python-ndn registers ``@app.route`` prefixes
before it runs ``after_start``), then ``served NAME`` per Interest.  Runs until SIGTERM, or exits
on its own after --max-seconds (a bound in case nobody stops it).
"""

from __future__ import annotations

import argparse
import logging
import signal

from ndn.app import NDNApp
from ndn.encoding import FormalName, InterestParam, Name


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

    @app.route(args.prefix)
    def on_interest(name: FormalName, _param: InterestParam, _app_param: object) -> None:
        app.put_data(name, content, freshness_period=args.freshness_ms)
        print(f"served {Name.to_str(name)}", flush=True)

    async def after_start() -> None:
        print(f"ready {args.prefix}", flush=True)

    app.run_forever(after_start=after_start())


if __name__ == "__main__":
    main()
