"""Pulling named chunks until a deadline, through the one fetcher (:mod:`icn.dataplane.fetcher`).

The collective's policy: a chunk may not exist yet when asked for (its producer holds the
Interest until it does), so only an expiry counts, and only once something asked later came
back; reordering says nothing (chunks are ready in any order).  Each Interest is asked again
when its lifetime ends and after a Nack (a pause that doubles), until the deadline; then the
fetch fails with a message naming the chunk.  The fetcher counts retransmissions
(``interests_retransmitted``) and the bytes that came back after one (``bytes_after_retx``):
recovered from a content store near the loss or from the source, or merely late when the
lifetime is shorter than the round trip under load.

With a :class:`~compute.collective.checks.ChunkCheck` (a member given ``validator=``) every
chunk is validated before it is returned or handed on; one refused is asked again past caches,
and :data:`~compute.collective.checks.REFUSALS_TO_FAIL` refusals of it fail the fetch with a
CollectiveError naming the refusal (see :mod:`compute.collective.checks`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence

from compute.collective.checks import REFUSALS_TO_FAIL, ChunkCheck
from compute.collective.errors import CollectiveError
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.fetcher import Fetcher, FetchPolicy, fetch
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
    check: ChunkCheck | None = None,
) -> memoryview:
    """The content of ``name`` (a view of the packet), asked again on every loss until
    ``until`` (loop time).  InterestTimeout when the deadline passes; with ``nack_gives_up`` a
    Nack is raised at once (an aggregator that learns a child is gone bypasses it instead of
    waiting).  With ``check``, only a valid chunk is returned: a refused one is asked again
    with MustBeFresh, and CollectiveError names the refusal after a few."""
    loop = asyncio.get_running_loop()
    refused = 0
    why = ""
    while True:
        left = until - loop.time()
        if left <= 0:
            if refused:
                raise CollectiveError(f"{to_uri(name)}: no valid chunk in time; refused: {why}")
            raise InterestTimeout(to_uri(name), 0, None)
        policy = chunk_policy(lifetime_ms, left, 1, nack_gives_up)
        try:
            dv = await fetch(ep, name, policy, counters=counters, must_be_fresh=refused > 0)
        except InterestTimeout:
            if refused:
                raise CollectiveError(
                    f"{to_uri(name)}: no valid chunk in time; refused: {why}"
                ) from None
            raise
        if check is None:
            return content_of(dv)
        verdict = await check.check(dv)
        if verdict is None:
            return content_of(dv)
        refused += 1
        why = verdict
        if refused >= REFUSALS_TO_FAIL:
            raise CollectiveError(f"{to_uri(name)} refused {refused} times: {why}")
        await asyncio.sleep(min(0.05 * 2**refused, max(0.0, until - loop.time())))


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
    check: ChunkCheck | None = None,
) -> None:
    """Fetch every name, ``window`` at a time; ``on_content(i, content)`` as each arrives (in
    any order; a view of the packet, for the callee to copy where it belongs).  CollectiveError
    naming the first chunk that did not come by ``until``.  With ``check`` only valid chunks
    reach ``on_content``: one whose signer's certificate is being fetched is asked again, one
    refused is asked again past caches, and CollectiveError names the refusal after a few."""
    if not names:
        return
    left = until - asyncio.get_running_loop().time()
    refusals: Counter[int] = Counter()
    reasons: dict[int, str] = {}
    try:
        if left <= 0:
            raise InterestTimeout(to_uri(names[0]), 0, None)
        todo = len(names)
        nxt = 0

        def next_key() -> int | None:
            nonlocal nxt
            if nxt >= len(names):
                return None
            nxt += 1
            return nxt - 1

        def arrived(i: int, dv: DataView) -> bool:
            nonlocal todo
            if check is not None:
                verdict = check.now(dv)
                if isinstance(verdict, str):
                    refusals[i] += 1
                    reasons[i] = verdict
                    if refusals[i] >= REFUSALS_TO_FAIL:
                        raise CollectiveError(
                            f"{what}: {to_uri(names[i])} refused {refusals[i]} times: {verdict}"
                        )
                    return False  # asked again after a pause, with MustBeFresh
                if verdict is not None:  # its signer's chain is being fetched
                    return False
            on_content(i, content_of(dv))
            todo -= 1
            if not todo:
                fetcher.finish()
            return True

        policy = chunk_policy(lifetime_ms, left, max(1, window), False)
        fetcher: Fetcher[int] = Fetcher(
            ep, policy, names.__getitem__, next_key, arrived, counters=counters
        )
        await fetcher.run()
    except InterestTimeout as exc:
        refused = next(iter(reasons.values()), None)
        tail = f"; refused: {refused}" if refused is not None else ""
        raise CollectiveError(f"{what}: no answer for {exc.name} in time{tail}") from None
