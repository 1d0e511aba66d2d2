"""Run a stream operator graph to its end: examples/stream_graph.yaml.

    python examples/stream_graph.py

A forwarder runs in this process; each operator instance of the graph gets a face of its own on
it and publishes its output as named, sequenced batches that the next operator pulls.  The sink
prints each record as a JSON line; the script then prints how many came out and stops.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from apps.inproc import attach_endpoint
from compute.stream import FlowRun, load_graph
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint

GRAPH = Path(__file__).resolve().parent / "stream_graph.yaml"
TIMEOUT = 30.0  # seconds the graph gets to reach its end


async def main() -> None:
    graph = load_graph(GRAPH)
    daemon = ForwarderDaemon(config_from_dict({"listen": {}}))  # in memory only: no socket
    await daemon.start()

    async def new_face() -> Endpoint:
        return attach_endpoint(daemon, label="flow")

    state = Path(tempfile.mkdtemp(prefix="icn-flow-"))  # checkpoints and source logs
    flow = FlowRun(graph, new_face, state_dir=state)
    try:
        await flow.start()
        if not await flow.wait(TIMEOUT):
            raise SystemExit(f"the graph did not end within {TIMEOUT:g} s")
        printed = sum(i.counters["records_out"] for i in flow.sinks)
        print(f"stream graph {graph.flow} done: {printed} window means printed")
    finally:
        await flow.stop()
        await daemon.stop()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
