"""Pulling many named chunks with a window of Interests in flight, until a deadline.

Each Interest is re-sent with a new Nonce when its lifetime ends (a lost Interest or Data), and
re-sent after a short pause when Nacked (no route yet, congestion), until the deadline; then the
fetch fails with a message naming the chunk.  Retransmissions are counted, and the bytes that
came back after one (``bytes_after_retx``): recovered from a content store near the loss or from
the source, or merely late when the lifetime is shorter than the round trip under load.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable, Sequence

from compute.collective.errors import CollectiveError
from icn.endpoint import Endpoint, PendingInterest
from icn.errors import InterestNack, InterestTimeout
from icn.name import to_uri
from icn.segments import data_content

NACK_PAUSE = 0.05  # first pause after a Nack; doubles, at most MAX_NACK_PAUSE
MAX_NACK_PAUSE = 1.0


def note_attempts(counters: Counter[str], rec: PendingInterest, nbytes: int) -> None:
    if rec.attempts > 1:
        counters["interests_retransmitted"] += rec.attempts - 1
        counters["bytes_after_retx"] += nbytes


async def fetch_one(
    ep: Endpoint,
    name: bytes,
    *,
    lifetime_ms: int,
    until: float,
    counters: Counter[str],
    nack_gives_up: bool = False,
) -> bytes:
    """The content of ``name``, asked again on every loss until ``until`` (loop time).
    InterestTimeout when the deadline passes; with ``nack_gives_up`` a Nack is raised at once
    (an aggregator that learns a child is gone bypasses it instead of waiting)."""
    loop = asyncio.get_running_loop()
    pause = NACK_PAUSE
    while True:
        left = until - loop.time()
        if left <= 0:
            raise InterestTimeout(to_uri(name), 0, None)
        life = max(1, min(lifetime_ms, int(left * 1000)))
        rec = ep.start(name, lifetime_ms=life, retries=max(0, math.ceil(left * 1000 / life) - 1))
        try:
            dv = await rec.future
        except InterestNack:
            if nack_gives_up:
                raise
            counters["nacks"] += 1
            await asyncio.sleep(min(pause, max(0.0, until - loop.time())))
            pause = min(pause * 2, MAX_NACK_PAUSE)
            continue
        finally:
            ep.drop(rec)
        content = data_content(dv)
        note_attempts(counters, rec, len(dv.wire))
        return content


async def fetch_many(
    ep: Endpoint,
    names: Sequence[bytes],
    on_content: Callable[[int, bytes], None],
    *,
    window: int,
    lifetime_ms: int,
    until: float,
    counters: Counter[str],
    what: str,
) -> None:
    """Fetch every name, ``window`` at a time; ``on_content(i, content)`` as each arrives (in
    any order).  CollectiveError naming the first chunk that did not come by ``until``."""
    pending: set[asyncio.Task[tuple[int, bytes]]] = set()
    nxt = 0

    async def one(i: int) -> tuple[int, bytes]:
        return i, await fetch_one(
            ep, names[i], lifetime_ms=lifetime_ms, until=until, counters=counters
        )

    try:
        while nxt < len(names) or pending:
            while nxt < len(names) and len(pending) < max(1, window):
                pending.add(asyncio.ensure_future(one(nxt)))
                nxt += 1
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                try:
                    i, content = task.result()
                except InterestTimeout as exc:
                    raise CollectiveError(f"{what}: no answer for {exc.name} in time") from None
                on_content(i, content)
    finally:
        for task in pending:
            task.cancel()
