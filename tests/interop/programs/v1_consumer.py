"""v1 ``ndn.app.NDNApp`` consumer: ``express_interest`` for PREFIX/0 .. PREFIX/N-1 and compare
each Data's Content with the bytes of FILE.

Retries on Nack/timeout a bounded number of times.  Prints ``result ok N`` and exits 0 when every
Content is exactly FILE; prints ``result FAIL ...`` and exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ndn.app import NDNApp
from ndn.encoding import Name
from ndn.types import InterestNack, InterestTimeout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("prefix")
    parser.add_argument("content_file")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--lifetime-ms", type=int, default=2000)
    parser.add_argument("--max-seconds", type=int, default=60)
    args = parser.parse_args()
    signal.alarm(args.max_seconds)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with open(args.content_file, "rb") as f:
        expected = f.read()

    app = NDNApp()
    failures: list[str] = []

    async def fetch_all() -> None:
        try:
            for i in range(args.count):
                name = f"{args.prefix}/{i}"
                for attempt in range(args.attempts):
                    try:
                        data_name, _meta, content = await app.express_interest(
                            name, must_be_fresh=True, lifetime=args.lifetime_ms
                        )
                        break
                    except (InterestNack, InterestTimeout) as exc:
                        print(f"attempt {attempt} for {name}: {exc!r}", flush=True)
                        await asyncio.sleep(0.2)
                else:
                    failures.append(f"{name}: no Data after {args.attempts} attempts")
                    continue
                got = bytes(content or b"")
                if Name.to_str(data_name) != name or got != expected:
                    failures.append(
                        f"{name}: got {Name.to_str(data_name)} with {len(got)} bytes, "
                        f"expected {len(expected)} bytes"
                    )
                else:
                    print(f"got {name} {len(got)} bytes", flush=True)
        except Exception as exc:  # report, then exit non-zero
            failures.append(f"error: {exc!r}")
        finally:
            app.shutdown()

    app.run_forever(after_start=fetch_all())
    if failures:
        print("result FAIL " + "; ".join(failures), flush=True)
        sys.exit(1)
    print(f"result ok {args.count}", flush=True)


if __name__ == "__main__":
    main()
