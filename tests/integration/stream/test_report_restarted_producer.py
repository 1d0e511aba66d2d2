"""A producer restarted from a checkpoint learns where its reader is, even when the reader
reports the very position it reported before the restart: the forwarder's content store
holds the old answer to that report, so a report it may answer never reaches the new
producer (found as a recovery run that hung: the window, restarted, waited for its sink,
which had taken everything and kept saying so)."""

from __future__ import annotations

import asyncio
from collections import Counter

from apps.inproc import attach_endpoint
from compute.stream.inlet import Inlet
from compute.stream.names import FlowNames
from compute.stream.outbox import Outbox
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon

STREAM = FlowNames("/f").stream("means", 0)


async def until(check: object, within: float = 5.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        if check():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.01)
    return False


async def test_the_same_report_reaches_a_restarted_producer() -> None:
    daemon = ForwarderDaemon(config_from_dict({"listen": {}}))
    await daemon.start()
    try:
        reader_ep = attach_endpoint(daemon, label="reader")
        first_ep = attach_endpoint(daemon, label="first")
        first = Outbox(first_ep, STREAM, ["out.0"], buffer=4, counters=Counter(), next_seq=4)
        await first.start()
        inlet = Inlet(reader_ep, STREAM, "out.0", counters=Counter())
        inlet.report(4, 3)
        assert await until(lambda: first.positions["out.0"] == (4, 3))
        await first.close()
        first_ep.close()
        # restarted from a checkpoint taken when the reader was at (3, 3)
        second_ep = attach_endpoint(daemon, label="second")
        positions = {"out.0": (3, 3)}
        second = Outbox(
            second_ep,
            STREAM,
            ["out.0"],
            buffer=4,
            counters=Counter(),
            next_seq=4,
            positions=positions,
        )
        await second.start()
        inlet.report(4, 3)
        assert await until(lambda: second.positions["out.0"] == (4, 3)), second.counters
        await second.close()
        second_ep.close()
        reader_ep.close()
    finally:
        await daemon.stop()
