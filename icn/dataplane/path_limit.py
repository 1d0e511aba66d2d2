"""How large a packet the path toward a prefix carries: the smallest largest-packet among the
next hops the application's forwarder has for the prefix, as its faces/list dataset reports
each face's (NFD's FaceStatus ``Mtu``): 4 MiB (``MAX_LOCAL_PACKET_SIZE``) on local faces (Unix
sockets, in-memory links: the producer is an application of the same forwarder), NDN's 8800 on
UDP and TCP faces unless the forwarder's ``udp_max_packet`` or ``tcp_max_packet`` raise it (a
fabric whose forwarders are all set alike, so the far end carries the same).

A forwarder drops a packet too large for the face it should leave by, silently as NFD does, so
a producer or consumer that sends large packets must know the path first: this asks the
forwarder's FIB and face table once (two management datasets).  Anything that cannot be asked
(no management, a remote forwarder, a face without an Mtu, as NFD's Unix faces) gives the
network size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icn.dataplane import mgmt_client
from icn.errors import IcnError
from icn.wire import tlv_types as T
from icn.wire.name import from_uri

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint

LOCAL_URI_SCHEMES = ("unix:", "memory:")


def carries_local_packets(ep: Endpoint) -> bool:
    """Whether the endpoint's own face to its forwarder is a local one."""
    return ep.uri.startswith(LOCAL_URI_SCHEMES)


def _face_limit(face: dict[str, object] | None) -> int:
    """The largest packet a faces/list row says its face carries (its Mtu), at least 8800."""
    mtu = None if face is None else face.get("mtu")
    if not isinstance(mtu, int) or mtu < T.MAX_PACKET_SIZE:
        return T.MAX_PACKET_SIZE
    return min(mtu, T.MAX_LOCAL_PACKET_SIZE)


async def path_packet_limit(ep: Endpoint, prefix: bytes) -> int:
    """The largest packet the path from ``ep`` to the producers of ``prefix`` (a name value)
    carries whole: the smallest of its next hops' limits (8800 to ``T.MAX_LOCAL_PACKET_SIZE``),
    ``T.MAX_PACKET_SIZE`` when the endpoint's own face is not local or the forwarder does not
    say."""
    if not carries_local_packets(ep):
        return T.MAX_PACKET_SIZE
    try:
        fib = await mgmt_client.status(ep, "fib/list")
        faces = await mgmt_client.status(ep, "faces/list")
    except (IcnError, TimeoutError):
        return T.MAX_PACKET_SIZE
    best: list[int] = []
    best_len = -1
    for entry in fib:
        name = from_uri(str(entry.get("name", "/")))
        if prefix.startswith(name) and len(name) > best_len:
            best_len = len(name)
            best = [int(h["face_id"]) for h in entry.get("next_hop_records") or []]
    if not best:
        return T.MAX_PACKET_SIZE
    rows = {int(f["face_id"]): f for f in faces}
    return min(_face_limit(rows.get(face)) for face in best)
