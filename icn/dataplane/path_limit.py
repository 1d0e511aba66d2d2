"""How large a packet the path toward a prefix carries: a local packet (up to
``MAX_LOCAL_PACKET_SIZE``) when the application's own face and every next hop its forwarder has
for the prefix are local faces (Unix sockets, in-memory links: the producer is an application of
the same forwarder), else NDN's network packet (8800 octets), which any face carries.

A forwarder drops a packet too large for the face it should leave by, silently as NFD does, so
a producer or consumer that sends large packets must know the path first: this asks the
forwarder's FIB and face table once (two management datasets).  Anything that cannot be asked
(no management, a remote forwarder) gives the network size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icn.dataplane import mgmt_client
from icn.errors import IcnError
from icn.wire import tlv_types as T
from icn.wire.name import from_uri

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint

LOCAL_SCOPE = ("1", "local")  # NFD's FaceScope 1, as the dataset's parser may name it
LOCAL_URI_SCHEMES = ("unix:", "memory:")


def carries_local_packets(ep: Endpoint) -> bool:
    """Whether the endpoint's own face to its forwarder is a local one."""
    return ep.uri.startswith(LOCAL_URI_SCHEMES)


async def path_packet_limit(ep: Endpoint, prefix: bytes) -> int:
    """The largest packet the path from ``ep`` to the producers of ``prefix`` (a name value)
    carries whole: ``T.MAX_LOCAL_PACKET_SIZE`` or ``T.MAX_PACKET_SIZE``."""
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
    scope = {int(f["face_id"]): str(f.get("face_scope", 0)).lower() for f in faces}
    if best and all(scope.get(face) in LOCAL_SCOPE for face in best):
        return T.MAX_LOCAL_PACKET_SIZE
    return T.MAX_PACKET_SIZE
