"""An aggregation node: pulls its children's chunks, folds them in order, publishes the result.

The root publishes ``/<job>/sum/<round>/<chunk>``; any other aggregator ``/<job>/agg/<node>/...``.
Nothing is computed ahead: the first Interest for a chunk starts pulling the children's (the
workers' Interests, aggregated in the PITs on the way, are the schedule).  A child aggregator
that is gone (its prefix Nacked) or silent for ``bypass_after`` seconds is bypassed: its own
children are pulled directly and folded in the same order, so the result is the same bits.  A
worker that does not answer within ``member_timeout`` makes the chunk an error, which reaches
every worker as a clear message instead of a silent timeout.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter, deque
from typing import Any

import numpy as np

from compute.collective.checks import ChunkCheck
from compute.collective.combine import Part, check_parts, combine, part_pieces, read_part
from compute.collective.errors import CollectiveError
from compute.collective.fetch import fetch_one
from compute.collective.names import JobNames
from compute.collective.plan import Plan
from compute.collective.publisher import ChunkPublisher, Key
from compute.collective.shared import SharedArena, SharedMaps
from compute.collective.wire import Layout, chunk_lead, chunk_signer, encode_error
from icn.dataplane.endpoint import Endpoint
from icn.errors import InterestNack, InterestTimeout
from icn.security.trust import Validator

log = logging.getLogger(__name__)

# Bytes owed to this aggregator at once (chunks being pulled, times children): kept under what a
# local face queues (16 MiB), or the forwarder drops pulls and every drop costs a lifetime.
IN_FLIGHT_BYTES = 8 << 20


class Aggregator:
    """Serves the aggregator ``node`` of ``plan`` on ``ep`` (``await start()``).

    ``signature``: how the chunks it publishes are signed (digest, null, or cert:
    ``ep.signer``, a certificate signer).  ``validator`` (the project's one, built with
    ``fetch=cert_fetcher(ep)``): every child's chunk is validated before it is folded; a
    refused one is never folded: dropped, counted (``chunks_refused``), asked again past caches,
    and after a few refusals the chunk is published as an error naming the refusal, which the
    workers raise as a CollectiveError (:mod:`compute.collective.checks`)."""

    def __init__(
        self,
        plan: Plan,
        node: str,
        ep: Endpoint,
        *,
        lifetime_ms: int = 1000,
        member_timeout: float = 30.0,
        bypass_after: float = 2.0,
        keep_rounds: int = 4,
        max_in_flight: int = 16,
        signature: str = "digest",
        shared: bool = False,
        validator: Validator | None = None,
    ) -> None:
        if not plan.is_aggregator(node):
            raise CollectiveError(f"{node!r} is not an aggregator of the plan", plan.job)
        self.plan, self.node, self.ep = plan, node, ep
        self.names = JobNames(plan.job)
        self.lifetime_ms = lifetime_ms
        self.member_timeout = member_timeout
        self.bypass_after = bypass_after
        self.counters: Counter[str] = Counter()
        self.gone: set[str] = set()  # child aggregators that answered with a Nack: bypassed
        self._heard: dict[str, float] = {}  # child aggregator -> when it last answered a chunk
        prefix = self.names.sum_prefix() if node == plan.root else self.names.agg_prefix(node)
        self.publisher = ChunkPublisher(
            ep,
            prefix,
            keep_rounds=keep_rounds,
            on_missing=self._start,
            counters=self.counters,
            signer=chunk_signer(signature, plan.job, ep.signer),
        )
        self.check = None if validator is None else ChunkCheck(validator, self.counters)
        self._tasks: set[asyncio.Task[None]] = set()
        self.max_in_flight = max_in_flight
        self._chunk_bytes = 8192  # learnt from the chunks pulled
        self._active = 0
        self._queue: deque[asyncio.Future[None]] = deque()
        # every chunk is folded into this one buffer and copied out into its packet at once,
        # with no await between: the buffer is free again for the next chunk
        self._scratch = np.empty(0, dtype=np.uint8)
        # shared: sums are folded into a memory file and referred to (compute/collective/shared)
        self.arena = SharedArena(f"icn-agg-{node}", keep_rounds) if shared else None
        self.maps = SharedMaps()  # children's chunks in shared memory, whatever ``shared`` is

    async def start(self, register: bool = True) -> None:
        """Serve the aggregator's prefix (``register=False``: answer it without announcing a
        route, for a forwarder whose routes are set otherwise)."""
        await self.publisher.start(register)

    async def close(self) -> None:
        """Stop pulling, withdraw the prefix, free the shared memory; the endpoint stays open."""
        for task in list(self._tasks):
            task.cancel()
        await self.publisher.close()
        self.maps.close()
        if self.arena is not None:
            self.arena.close()
        if self.check is not None:
            self.check.close()

    def stats(self) -> dict[str, Any]:
        """The counters, and ``bypassed``: the children given up on (their sums go without)."""
        return {**self.counters, "bypassed": sorted(self.gone)}

    # ---- computing a chunk -------------------------------------------------------------------

    def _start(self, key: Key) -> None:
        task = asyncio.ensure_future(self._compute(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _limit(self) -> int:
        fan_in = max(1, len(self.plan.children[self.node]))
        by_bytes = IN_FLIGHT_BYTES // max(1, self._chunk_bytes * fan_in)
        return max(2, min(self.max_in_flight, by_bytes))

    async def _enter(self) -> None:
        if self._active >= self._limit():
            fut = asyncio.get_running_loop().create_future()
            self._queue.append(fut)
            self.counters["chunks_queued"] += 1
            await fut  # _leave() hands its place over
        else:
            self._active += 1

    def _leave(self) -> None:
        while self._queue:
            fut = self._queue.popleft()
            if not fut.done():
                fut.set_result(None)  # the place passes on: _active stays
                return
        self._active -= 1

    async def _compute(self, key: Key) -> None:
        await self._enter()
        try:
            until = asyncio.get_running_loop().time() + self.member_timeout
            kids = self.plan.children[self.node]
            try:
                parts = await self._parts(self.node, key, until)
                header, total = combine(parts, kids, self._out(key, parts))
                check_parts(parts, kids, self.maps)
                # what a pull brings: the chunk, or only a reference to it
                shm = "shm" in parts[0][0]
                self._chunk_bytes = 4096 if shm else int(header.get("cb", self._chunk_bytes))
                if self.arena is not None:
                    header["shm"] = self.arena.seal(key[0], key[-1], total.nbytes).encode()
                    lead, payload = chunk_lead(header), memoryview(b"")
                else:
                    lead, payload = part_pieces((header, total))
                self.counters["chunks_aggregated"] += 1
            except CollectiveError as exc:
                self.counters["chunks_failed"] += 1
                log.warning("%s round %d chunk %d: %s", self.names.job, key[0], key[1], exc)
                lead, payload = encode_error(str(exc)), memoryview(b"")
            self.publisher.put(key, payload, lead)  # copies the sum out of the buffer
        finally:
            self._leave()

    def _out(self, key: Key, parts: list[Part]) -> Any:
        """Where ``key``'s fold goes: the reused buffer, or its place in the memory file."""
        arena = self.arena
        if arena is None:
            return self._buffer
        layout = Layout.from_header(parts[0][0])
        chunk = key[-1]
        if chunk >= layout.chunks:
            raise CollectiveError(f"chunk {chunk}: the layout has {layout.chunks} chunks")
        start, end = layout.span(chunk)
        if parts[0][1].nbytes != end - start:  # combine holds the other parts to the first
            raise CollectiveError(
                f"chunk {chunk} of {parts[0][1].nbytes} bytes: the layout's is {end - start}"
            )

        def place(dtype: np.dtype[Any], items: int) -> np.ndarray[Any, Any]:
            return arena.place(key[0], layout, key[-1], items * dtype.itemsize).view(dtype)

        return place

    def _buffer(self, dtype: np.dtype[Any], items: int) -> np.ndarray[Any, Any]:
        """The reused buffer, as ``items`` of ``dtype`` (grown to the largest chunk seen)."""
        nbytes = items * dtype.itemsize
        if len(self._scratch) < nbytes:
            self._scratch = np.empty(nbytes, dtype=np.uint8)
        return self._scratch[:nbytes].view(dtype)

    async def _parts(self, node: str, key: Key, until: float) -> list[Part]:
        """``node``'s children's parts for ``key``, in the plan's order (``node`` is this
        aggregator, or one being bypassed)."""
        kids = self.plan.children[node]
        return list(await asyncio.gather(*(self._child(kid, key, until) for kid in kids)))

    async def _child(self, kid: str, key: Key, until: float) -> Part:
        if not self.plan.is_aggregator(kid):
            name = JobNames.piece(self.names.worker_prefix(kid), *key)
            try:
                content = await fetch_one(
                    self.ep,
                    name,
                    lifetime_ms=self.lifetime_ms,
                    until=until,
                    counters=self.counters,
                    check=self.check,
                )
            except InterestTimeout:
                raise CollectiveError(
                    f"worker {kid} did not contribute round {key[0]} chunk {key[1]} within "
                    f"{self.member_timeout:g} s (dead, or a straggler past the deadline)"
                ) from None
            return read_part(content, f"worker {kid}", self.maps)
        loop = asyncio.get_running_loop()
        name = JobNames.piece(self.names.agg_prefix(kid), *key)
        wait, lifetime_ms = self.bypass_after, min(self.lifetime_ms, int(self.bypass_after * 1000))
        while kid not in self.gone:
            try:
                # a live child answers within its own member timeout (its error included);
                # silence for bypass_after means dead or stuck: pull its children instead
                content = await fetch_one(
                    self.ep,
                    name,
                    lifetime_ms=lifetime_ms,
                    until=loop.time() + wait,
                    counters=self.counters,
                    nack_gives_up=True,
                    check=self.check,
                )
                self._heard[kid] = loop.time()
                return read_part(content, f"aggregator {kid}", self.maps)
            except InterestNack:
                if kid not in self.gone:
                    log.warning(
                        "%s: aggregator %s is gone; pulling its children directly",
                        self.names.job,
                        kid,
                    )
                self.gone.add(kid)
            except InterestTimeout:
                # not silence if it answered other chunks during this wait: on a slow link
                # its answers queue behind each other, and a bypass would pull its children's
                # chunks over that same link.  Ask again, up to the member timeout
                now = loop.time()
                if now - self._heard.get(kid, -math.inf) < wait and now < until:
                    self.counters["slow_child_waited"] += 1
                    # each time twice as long, the Interest living as long as the wait: one
                    # that expires while its answer waits in the link's queue has that answer
                    # dropped on arrival, and asked for again behind everything else
                    wait = min(2 * wait, max(until - now, self.bypass_after))
                    lifetime_ms = int(wait * 1000)
                    continue
                self.counters["bypass_slow"] += 1
                break
        self.counters["chunks_bypassed"] += 1
        # the bypass starts the members' clock again: a straggler under a dead aggregator
        # gets the whole member timeout, and a dead worker is named, not its neighbours
        parts = await self._parts(kid, key, loop.time() + self.member_timeout)
        grandkids = self.plan.children[kid]
        total = combine(parts, grandkids)  # a new array: it waits for its siblings
        check_parts(parts, grandkids, self.maps)
        return total
