"""The internal face between the forwarder and the management dispatcher (NFD's internal face).

It has the reserved face id 1 and local scope, and the FIB sends ``/localhost/nfd`` and
``/localhop/nfd`` to it, so management Interests go through the same pipelines as any other:
scope checks, PIT aggregation, counters.  Answers come back into the forwarder as Data arriving
on this face, marked NoCache (a cached response would answer a replayed command without it
reaching the replay check, and datasets must be regenerated, not served stale).

The dispatcher must know which face asked (FaceId 0 means "the requesting face"): the face
finds the PIT in-record whose nonce is the one of the Interest it was handed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from forwarder.fw.forwarder import Forwarder
from forwarder.mgmt.dispatcher import Dispatcher
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.lp import LpView
from icn.wire.name import from_uri
from icn.wire.packet import parse_interest

MGMT_FACE_ID = 1
MGMT_FACE_URI = "internal://"
MGMT_PREFIXES = (from_uri("/localhost/nfd"), from_uri("/localhop/nfd"))

_NO_CACHE = LpView()
_NO_CACHE.cache_policy = T.CACHE_POLICY_NO_CACHE


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

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        self.counters["mgmt.unexpected_data"] += 1  # we never express Interests

    def send_nack(self, interest_wire: bytes, reason: int, pit_token: bytes | None = None) -> None:
        self.counters["mgmt.unexpected_nack"] += 1

    def _reply(self, wire: bytes) -> None:
        self.fw.receive_data(MGMT_FACE_ID, wire, _NO_CACHE)
