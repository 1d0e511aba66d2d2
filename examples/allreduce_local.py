"""An allreduce in the network: a forwarder, an aggregator and four workers in one script.

    python examples/allreduce_local.py

The forwarder runs in this process (the daemon ``icn fwd`` runs), listening on a Unix socket in
a temporary directory.  The aggregator and the four workers of a flat plan each connect to it
as separate programs would.  Every worker contributes an array, and every worker gets the sum,
pulled from the aggregator as named data.  The script checks the sum at every worker, prints
it, and stops everything.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import numpy as np

from compute.collective import Aggregator, Collective, Plan
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint

WORKERS = ["0", "1", "2", "3"]
SIZE = 100_000  # floats per worker


async def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="icn-allreduce-"))
    daemon = ForwarderDaemon(config_from_dict({"listen": {"unix": str(tmp / "fwd.sock")}}))
    await daemon.start()
    uri = daemon.listen_uris[0]
    members: list[Aggregator | Collective] = []
    try:
        plan = Plan.flat("/ar", WORKERS, root="ps")  # one aggregator, every worker its child
        aggregator = Aggregator(plan, "ps", await Endpoint.connect(uri))
        await aggregator.start()
        members.append(aggregator)
        workers = []
        for name in WORKERS:
            worker = Collective(plan, name, await Endpoint.connect(uri))
            await worker.start()
            members.append(worker)
            workers.append(worker)
        # worker r contributes r + 1 everywhere, so every element of the sum is 1+2+3+4 = 10
        arrays = [np.full(SIZE, float(r + 1), dtype=np.float32) for r in range(len(WORKERS))]
        results = await asyncio.gather(
            *(w.allreduce(a, "sum") for w, a in zip(workers, arrays, strict=True))
        )
        expected = np.sum(arrays, axis=0)
        for worker, result in zip(workers, results, strict=True):
            if not np.array_equal(result, expected):
                raise SystemExit(f"worker {worker.worker} got a wrong sum")
        print(
            f"allreduce ok: {len(WORKERS)} workers, {SIZE:,} floats each, "
            f"every element of the sum is {results[0][0]:g} at every worker"
        )
    finally:
        for member in reversed(members):
            await member.close()
            member.ep.close()
        await daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
