"""The internal face between the forwarder and the management dispatcher (NFD's internal face).

It has the reserved face id 1 and local scope, and the FIB sends ``/localhost/nfd`` and
``/localhop/nfd`` to it, so management Interests go through the same pipelines as any other:
scope checks, PIT aggregation, counters.  Answers come back into the forwarder as Data arriving
on this face, marked NoCache (a cached response would answer a replayed command without it
reaching the replay check, and datasets must be regenerated, not served stale).

The dispatcher must know which face asked (FaceId 0 means "the requesting face"): the face
finds the PIT in-record whose nonce is the one of the Interest it was handed.

It also fetches, for the trust policy of ``/localhop`` commands, the certificate a command's
signer names, from the face the command came on (NFD's direct fetch: the requester is the one
who can serve it, whatever the FIB says): an Interest with NextHopFaceId, at most
``MAX_FETCHES`` at once, each ending with its Data, or None at a Nack or its lifetime.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Callable

from forwarder.fw.forwarder import Forwarder
from forwarder.mgmt.dispatcher import Dispatcher
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.encode import make_interest
from icn.wire.lp import LpView
from icn.wire.name import from_uri
from icn.wire.packet import parse_data, parse_interest

MGMT_FACE_ID = 1
MGMT_FACE_URI = "internal://"
MGMT_PREFIXES = (from_uri("/localhost/nfd"), from_uri("/localhop/nfd"))

_NO_CACHE = LpView()
_NO_CACHE.cache_policy = T.CACHE_POLICY_NO_CACHE
MAX_FETCHES = 64  # certificate fetches in flight; more wait for none and get None


class ManagementFace:
    """A ``FaceLike`` whose upstream is the dispatcher."""

    is_local = True
    local_uri = MGMT_FACE_URI
    remote_uri = MGMT_FACE_URI

    def __init__(
        self,
        fw: Forwarder,
        make_dispatcher: Callable[[Callable[[bytes], None]], Dispatcher],
        *,
        defer: Callable[..., object] | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        self.face_id = MGMT_FACE_ID
        self.fw = fw
        self.counters: Counter[str] = fw.counters if counters is None else counters
        self.dispatcher = make_dispatcher(self._reply)
        # Handling is deferred to the next loop turn: the strategy that sent us the Interest
        # is still running, and an answer now would satisfy its PIT entry under its feet.
        self._defer = defer
        self._fetches: dict[bytes, list[asyncio.Future[bytes | None]]] = {}

    def attach(self) -> None:
        """Join the forwarder and route the management prefixes here."""
        self.fw.add_face(self)
        for prefix in MGMT_PREFIXES:
            self.fw.fib.add_nexthop(prefix, MGMT_FACE_ID, 0)

    def send_interest(self, wire: bytes) -> None:
        try:
            iv = parse_interest(wire)
        except DecodeError:  # the forwarder parsed it already; cannot happen
            self.counters["mgmt.drop_malformed_interest"] += 1
            return
        requester = self.fw.pit.downstream_with_nonce(iv.name, iv.nonce) or 0
        defer = self._defer or asyncio.get_running_loop().call_soon
        defer(self.dispatcher.handle, iv, requester)

    async def fetch_from(self, face_id: int, name: bytes, lifetime_ms: int) -> bytes | None:
        """The first Data under ``name`` that face ``face_id`` answers (the Interest goes there,
        CanBePrefix, whatever the FIB says), or None: Nacked, unanswered in ``lifetime_ms``, or
        too many fetches in flight."""
        if sum(len(w) for w in self._fetches.values()) >= MAX_FETCHES:
            self.counters["mgmt.fetch_refused_busy"] += 1
            return None
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._fetches.setdefault(name, []).append(future)
        lp = LpView()
        lp.next_hop_face_id = face_id
        wire = make_interest(name, can_be_prefix=True, lifetime=lifetime_ms, nonce=os.urandom(4))
        self.counters["mgmt.fetch"] += 1
        self.fw.receive_interest(MGMT_FACE_ID, wire, lp)
        try:
            return await asyncio.wait_for(future, lifetime_ms / 1000.0)
        except TimeoutError:
            self.counters["mgmt.fetch_timeout"] += 1
            return None
        finally:
            waiting = self._fetches.get(name)
            if waiting is not None and future in waiting:
                waiting.remove(future)
                if not waiting:
                    del self._fetches[name]

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        if self._fetches:
            try:
                data_name = parse_data(wire).name
            except DecodeError:
                data_name = b""
            for name in [n for n in self._fetches if data_name.startswith(n)]:
                for future in self._fetches.pop(name):
                    if not future.done():
                        future.set_result(wire)
                return
        self.counters["mgmt.unexpected_data"] += 1  # nothing of ours asked for it

    def send_nack(self, interest_wire: bytes, reason: int, pit_token: bytes | None = None) -> None:
        try:
            name = parse_interest(interest_wire).name
        except DecodeError:
            name = b""
        waiting = self._fetches.pop(name, None)
        if waiting is None:
            self.counters["mgmt.unexpected_nack"] += 1
            return
        for future in waiting:
            if not future.done():
                future.set_result(None)

    def _reply(self, wire: bytes) -> None:
        self.fw.receive_data(MGMT_FACE_ID, wire, _NO_CACHE)
