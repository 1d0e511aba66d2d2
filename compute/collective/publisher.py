"""Serving chunks by name: what a worker contributes and what an aggregator computes.

A chunk is published under ``<prefix>/<round>/<chunk>`` (or ``/<round>/<step>/<chunk>``).  An
Interest for one not produced yet is held, up to its lifetime, and answered the moment it is:
a straggler's parent waits instead of retrying into silence.  An Interest for a name already
answered once reaches the source only if no cache on the way had it: those bytes are counted as
re-sent by the source (``bytes_resent``), the figure the report sets against the bytes content
stores recovered.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from compute.collective.names import JobNames
from icn.dataplane.endpoint import Endpoint, Served
from icn.dataplane.handlers import Reply
from icn.dataplane.holding import HoldingTable
from icn.wire.encode import DataParts, data_parts
from icn.wire.packet import InterestView
from icn.wire.signer import Signer
from icn.wire.tlv import Buffer

Key = tuple[int, ...]
MAX_WAITING = 65536  # reply paths waiting for chunks not produced yet, over all keys


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class ChunkPublisher:
    """Serves ``prefix`` from produced chunks; keeps the last ``keep_rounds`` rounds.

    ``on_missing(key)`` is called (once per key) when an Interest asks for a chunk of a kept
    round that is not there yet: an aggregator starts computing it then.  ``clock`` gives the
    time (the running loop's by default)."""

    def __init__(
        self,
        ep: Endpoint,
        prefix: bytes,
        *,
        depth: int = 2,
        keep_rounds: int = 4,
        on_missing: Callable[[Key], None] | None = None,
        counters: Counter[str] | None = None,
        max_waiting: int = MAX_WAITING,
        clock: Callable[[], float] = _loop_time,
        signer: Signer | None = None,
    ) -> None:
        self.ep = ep
        # the chunks' signer; None: the endpoint's
        self.signer = signer
        self.prefix = prefix
        self.depth = depth  # decimal components after the prefix: (round, chunk) or with a step
        self.keep_rounds = keep_rounds
        self.on_missing = on_missing
        self.counters: Counter[str] = Counter() if counters is None else counters
        self._wires: dict[Key, bytes | DataParts] = {}
        self._done_rounds: set[int] = set()  # retired: their chunks are no longer served
        self._answered: set[Key] = set()
        self.waiting: HoldingTable[Key, Reply] = HoldingTable(max_waiting)
        self._clock = clock
        self._asked: set[Key] = set()
        self.newest_round = -1
        self._served: Served | None = None

    async def start(self, register: bool = True) -> None:
        self._served = await self.ep.serve(self.prefix, self.handle, register=register)

    async def close(self) -> None:
        if self._served is not None:
            await self._served.close()
        self.waiting.clear()

    # ---- producing ---------------------------------------------------------------------------

    def has(self, key: Key) -> bool:
        return key in self._wires

    def put(self, key: Key, payload: Buffer, lead: bytes = b"", *, view: bool = False) -> None:
        """Publish the chunk ``key`` (its Content ``lead`` then ``payload``) and answer whoever
        waits for it.  The payload is copied once, into the packet; with ``view`` it is not
        copied at all (the packet is kept in parts, sent by one vectored write): the caller
        then leaves it unchanged until it :meth:`retire` s the round."""
        if key in self._wires or key[0] in self._done_rounds:
            return
        if key[0] > self.newest_round:
            self.newest_round = key[0]
            self._forget_old()
        if key[0] <= self.newest_round - self.keep_rounds:
            return
        parts = data_parts(
            JobNames.piece(self.prefix, *key),
            payload,
            lead=lead,
            signer=self.ep.signer if self.signer is None else self.signer,
        )
        wire = parts if view else parts.join()
        self._wires[key] = wire
        self.counters["chunks_published"] += 1
        if key in self.waiting:
            replies = self.waiting.publish(key, self._clock())
            for reply in replies:
                self._send(key, wire, reply)
            self.counters["held_answered"] += len(replies)

    def retire(self, rnd: int) -> None:
        """Stop serving round ``rnd``: its chunks were all consumed (an allreduce's sum came
        back whole), so a late Interest for one is dropped (``drop_round_done``) instead of
        reading a payload its owner may have changed since."""
        for key in [k for k in self._wires if k[0] == rnd]:
            del self._wires[key]
        for key in [k for k in self.waiting if k[0] == rnd]:
            self.waiting.drop(key)
        self._done_rounds.add(rnd)

    def detach(self, rnd: int) -> None:
        """Copy round ``rnd``'s payloads put as views into their packets (the same bytes): the
        arrays they viewed may change now, and the round is still served."""
        for key, wire in self._wires.items():
            if key[0] == rnd and isinstance(wire, DataParts):
                self._wires[key] = wire.join()

    def _forget_old(self) -> None:
        oldest = self.newest_round - self.keep_rounds
        for key in [k for k in self._wires if k[0] <= oldest]:
            del self._wires[key]
        self._done_rounds = {r for r in self._done_rounds if r > oldest}
        for key in [k for k in self.waiting if k[0] <= oldest]:
            self.waiting.drop(key)
        self._answered = {k for k in self._answered if k[0] > oldest}
        self._asked = {k for k in self._asked if k[0] > oldest}

    # ---- answering ---------------------------------------------------------------------------

    def handle(self, iv: InterestView, reply: Reply) -> None:
        key = JobNames.numbers_after(self.prefix, iv.name, self.depth)
        if key is None:
            self.counters["drop_bad_name"] += 1
            return
        wire = self._wires.get(key)
        if wire is not None:
            self._send(key, wire, reply)
            return
        if key[0] <= self.newest_round - self.keep_rounds:
            self.counters["drop_round_gone"] += 1  # long forgotten: the asker will time out
            return
        if key[0] in self._done_rounds:
            self.counters["drop_round_done"] += 1
            return
        now = self._clock()
        waiting = self.waiting
        waiting.expire(now)  # room for the live: nobody answers an expired one
        if not waiting.hold(key, reply, now + iv.lifetime / 1000.0, now):
            self.counters["drop_held_full"] += 1
            return
        if self.on_missing is not None and key not in self._asked:
            self._asked.add(key)
            self.on_missing(key)

    def _send(self, key: Key, wire: bytes | DataParts, reply: Reply) -> None:
        size = wire.size if isinstance(wire, DataParts) else len(wire)
        if key in self._answered:
            self.counters["bytes_resent"] += size
            self.counters["chunks_resent"] += 1
        else:
            self._answered.add(key)
            self.counters["bytes_sent"] += size
        reply(wire)
