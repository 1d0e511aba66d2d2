"""In-memory transport pair: for unit tests and for apps co-located with a forwarder.

Delivery is deferred, never re-entrant: a packet sent from inside a pipeline reaches the other
end after the current callback returns, so a co-located app answering at once cannot re-enter
the forwarder mid-pipeline.  Packets queue in a deque drained by one scheduled callback per
burst (not one per packet); the queue is bounded in bytes like a socket's write buffer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from forwarder.face.transport import Transport
from forwarder.face_api import Counters
from icn.wire import tlv_types as T

# Bytes in flight towards one end, as a Unix face's send queue: an in-memory face is local, so
# it carries packets up to MAX_LOCAL_PACKET_SIZE (there is no other size limit) and holds four.
DEFAULT_QUEUE_LIMIT = 4 * T.MAX_LOCAL_PACKET_SIZE

CallSoon = Callable[[Callable[[], None]], Any]

_names = itertools.count(1)


class MemoryTransport(Transport):
    """One end of a pair made by :func:`memory_pair`; always local scope."""

    def __init__(
        self,
        *,
        counters: Counters[str],
        name: str,
        mtu: int | None,
        queue_limit: int,
        call_soon: CallSoon | None,
    ) -> None:
        super().__init__(
            local_uri=f"memory://{name}",
            remote_uri=f"memory://{name}",
            is_local=True,
            counters=counters,
            mtu=mtu,
            max_packet=T.MAX_LOCAL_PACKET_SIZE,
        )
        self.peer: MemoryTransport | None = None
        self.queue_limit = queue_limit
        self._call_soon = call_soon
        self._inbox: deque[bytes] = deque()
        self._inbox_bytes = 0
        self._scheduled = False

    @property
    def send_queue_capacity(self) -> int:
        return self.queue_limit

    def send_queue_length(self) -> int:
        # what we sent that the other end has not taken yet: its inbox
        peer = self.peer
        return -1 if peer is None else peer._inbox_bytes

    def send(self, wire: bytes) -> None:
        peer = self.peer
        if self.closed or peer is None or peer.closed:
            self.counters["face.drop_closed"] += 1
            return
        if peer._inbox_bytes + len(wire) > self.queue_limit:
            self.counters["face.drop_send_queue_full"] += 1
            return
        self.out_bytes += len(wire)
        peer._inbox.append(wire)
        peer._inbox_bytes += len(wire)
        if not peer._scheduled:
            peer._scheduled = True
            call_soon = self._call_soon or asyncio.get_running_loop().call_soon
            call_soon(peer._drain)

    def _drain(self) -> None:
        self._scheduled = False
        inbox = self._inbox
        # only what is queued now: packets sent while draining wait for the next round
        for _ in range(len(inbox)):
            if self.closed:
                break
            wire = inbox.popleft()
            self._inbox_bytes -= len(wire)
            self._deliver(wire)
        if self.closed:
            inbox.clear()
            self._inbox_bytes = 0

    def _close_io(self) -> None:
        self._inbox.clear()
        self._inbox_bytes = 0
        peer, self.peer = self.peer, None
        if peer is not None:
            peer.peer = None
            # the other end sees the link go down, as a socket peer would see EOF
            peer.close()


def memory_pair(
    counters: Counters[str],
    *,
    name: str | None = None,
    mtu: int | None = None,
    queue_limit: int = DEFAULT_QUEUE_LIMIT,
    call_soon: CallSoon | None = None,
) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected transports.  ``call_soon`` defaults to the running loop's; a test may pass
    its own to run deliveries by hand.  ``mtu`` makes the faces fragment, as over UDP."""
    label = name or f"pair-{next(_names)}"
    a = MemoryTransport(
        counters=counters,
        name=f"{label}-a",
        mtu=mtu,
        queue_limit=queue_limit,
        call_soon=call_soon,
    )
    b = MemoryTransport(
        counters=counters,
        name=f"{label}-b",
        mtu=mtu,
        queue_limit=queue_limit,
        call_soon=call_soon,
    )
    a.peer, b.peer = b, a
    a.remote_uri, b.remote_uri = b.local_uri, a.local_uri
    return a, b
