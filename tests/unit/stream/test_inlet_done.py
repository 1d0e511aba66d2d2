"""An inlet's answer callback for an Interest it no longer waits for (dropped after the last
batch came) still takes the Interest's error, so asyncio never logs it as unretrieved (seen
as "Future exception was never retrieved ... InterestTimeout" at the end of a soak's
stream)."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from typing import Any

from compute.stream.inlet import Inlet
from icn.errors import InterestTimeout


async def test_an_unwanted_timeout_is_retrieved() -> None:
    loop = asyncio.get_running_loop()
    logged: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: logged.append(context))
    inlet = Inlet(None, b"/s/op/0", "r", counters=Counter())  # type: ignore[arg-type]
    fut: asyncio.Future[Any] = loop.create_future()
    fut.set_exception(InterestTimeout("/s/op/0/seq=9", 1))
    # seq 9 is not asked any more
    inlet.fetcher._answered(9, object(), fut)  # type: ignore[arg-type]
    del fut
    gc.collect()
    await asyncio.sleep(0)
    assert not logged, logged
