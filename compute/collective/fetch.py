"""Pulling named chunks until a deadline, through the one fetcher (:mod:`icn.dataplane.fetcher`).

The collective's policy: a chunk may not exist yet when asked for (its producer holds the
Interest until it does), so only an expiry counts, and only once something asked later came
back; reordering says nothing (chunks are ready in any order).  Each Interest is asked again
when its lifetime ends and after a Nack (a pause that doubles), until the deadline; then the
fetch fails with a message naming the chunk.  The fetcher counts retransmissions
(``interests_retransmitted``) and the bytes that came back after one (``bytes_after_retx``):
recovered from a content store near the loss or from the source, or merely late when the
lifetime is shorter than the round trip under load.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence

from compute.collective.errors import CollectiveError
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.fetcher import FetchPolicy, fetch, fetch_all
from icn.dataplane.segments import content_view
from icn.errors import InterestTimeout
from icn.wire.name import to_uri
from icn.wire.packet import DataView


def content_of(dv: DataView) -> memoryview:
    """The Content of a received Data, in place (a view of its packet, not a copy)."""
    if dv.content_start >= 0:
        return memoryview(dv.wire)[dv.content_start : dv.content_end]
    return content_view(dv.wire)


def chunk_policy(lifetime_ms: int, left: float, window: int, nack_gives_up: bool) -> FetchPolicy:
    """The collective's policy (module docstring): ``left`` seconds, ``window`` fixed."""
    return FetchPolicy(
        lifetime_ms=lifetime_ms,
        deadline=left,
        max_retries=None,
        rto_retransmit=False,
        loss_needs_later_arrival=True,
        reorder=0,
        loss_decreases=False,
        nack_gives_up=nack_gives_up,
        initial_window=window,
        max_window=window,
    )


async def fetch_one(
    ep: Endpoint,
    name: bytes,
    *,
    lifetime_ms: int,
    until: float,
    counters: Counter[str],
    nack_gives_up: bool = False,
) -> memoryview:
    """The content of ``name`` (a view of the packet), asked again on every loss until
    ``until`` (loop time).  InterestTimeout when the deadline passes; with ``nack_gives_up`` a
    Nack is raised at once (an aggregator that learns a child is gone bypasses it instead of
    waiting)."""
    left = until - asyncio.get_running_loop().time()
    if left <= 0:
        raise InterestTimeout(to_uri(name), 0, None)
    policy = chunk_policy(lifetime_ms, left, 1, nack_gives_up)
    return content_of(await fetch(ep, name, policy, counters=counters))


async def fetch_many(
    ep: Endpoint,
    names: Sequence[bytes],
    on_content: Callable[[int, memoryview], None],
    *,
    window: int,
    lifetime_ms: int,
    until: float,
    counters: Counter[str],
    what: str,
) -> None:
    """Fetch every name, ``window`` at a time; ``on_content(i, content)`` as each arrives (in
    any order; a view of the packet, for the callee to copy where it belongs).  CollectiveError
    naming the first chunk that did not come by ``until``."""
    left = until - asyncio.get_running_loop().time()
    try:
        if left <= 0 and names:
            raise InterestTimeout(to_uri(names[0]), 0, None)

        def arrived(i: int, dv: DataView) -> None:
            on_content(i, content_of(dv))

        policy = chunk_policy(lifetime_ms, left, max(1, window), False)
        await fetch_all(ep, names, arrived, policy, counters=counters)
    except InterestTimeout as exc:
        raise CollectiveError(f"{what}: no answer for {exc.name} in time") from None
