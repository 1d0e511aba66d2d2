"""The path limit an app learns from its forwarder (icn.dataplane.path_limit) is what the next
hops carry, as the faces/list dataset reports each face's largest packet (NFD's Mtu): a daemon
with no sockets, an app on a memory face, UDP faces on fake sockets with NDN's 8800 or a raised
``udp_max_packet``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from apps.inproc import add_route, attach_endpoint, link
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.face.udp import UdpListener
from icn.dataplane import mgmt_client
from icn.dataplane.path_limit import path_packet_limit
from icn.wire import tlv_types as T
from icn.wire.name import from_uri

LIMIT = 128 << 10


@pytest.fixture
async def daemon() -> AsyncIterator[ForwarderDaemon]:
    d = ForwarderDaemon(config_from_dict({"listen": {}, "udp_max_packet": LIMIT}))
    await d.start()
    try:
        yield d
    finally:
        await d.stop()


class _NoSocket:
    def get_write_buffer_size(self) -> int:
        return 0

    def sendto(self, data: bytes, addr: object) -> None:
        pass


async def udp_face(daemon: ForwarderDaemon, peer: str, max_packet: int) -> int:
    """A persistent UDP face in ``daemon`` carrying ``max_packet``, on a socket that is a fake."""
    listener = UdpListener(
        "udp4://0.0.0.0:6363",
        counters=daemon.counters,
        on_face=daemon.faces.add,
        max_packet=max_packet,
    )
    listener.connection_made(_NoSocket())  # type: ignore[arg-type]
    return (await listener.connect(peer)).face_id


async def test_faces_list_reports_each_faces_largest_packet(daemon: ForwarderDaemon) -> None:
    ep = attach_endpoint(daemon)
    try:
        jumbo = await udp_face(daemon, "udp4://10.0.0.2:6363", LIMIT)
        plain = await udp_face(daemon, "udp4://10.0.0.3:6363", T.MAX_PACKET_SIZE)
        rows = {f["face_id"]: f for f in await mgmt_client.status(ep, "faces/list")}
        assert rows[jumbo]["mtu"] == LIMIT
        assert rows[plain]["mtu"] == T.MAX_PACKET_SIZE
        local = [f for f in rows.values() if str(f["uri"]).startswith("memory")]
        assert local and all(f["mtu"] == T.MAX_LOCAL_PACKET_SIZE for f in local)
    finally:
        ep.close()


async def test_path_limit_is_the_smallest_of_the_next_hops(daemon: ForwarderDaemon) -> None:
    ep = attach_endpoint(daemon)
    try:
        jumbo = await udp_face(daemon, "udp4://10.0.0.2:6363", LIMIT)
        plain = await udp_face(daemon, "udp4://10.0.0.3:6363", T.MAX_PACKET_SIZE)
        local, _ = link(daemon, ForwarderDaemon(config_from_dict({"listen": {}})))
        add_route(daemon, "/jumbo", jumbo)
        add_route(daemon, "/mixed", jumbo)
        add_route(daemon, "/mixed", plain)
        add_route(daemon, "/near", local)
        add_route(daemon, "/near/far", local)
        add_route(daemon, "/near/far", jumbo)
        assert await path_packet_limit(ep, from_uri("/jumbo/f/x")) == LIMIT
        assert await path_packet_limit(ep, from_uri("/mixed/f")) == T.MAX_PACKET_SIZE
        assert await path_packet_limit(ep, from_uri("/near/f")) == T.MAX_LOCAL_PACKET_SIZE
        assert await path_packet_limit(ep, from_uri("/near/far/f")) == LIMIT
        assert await path_packet_limit(ep, from_uri("/nowhere")) == T.MAX_PACKET_SIZE
    finally:
        ep.close()


async def test_a_face_that_reports_no_mtu_counts_as_ndns_size(
    daemon: ForwarderDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forwarder that leaves Mtu out (NFD's Unix faces) or reports NFD's cap: 8800, local
    scope or not (NFD carries no more on any face)."""
    ep = attach_endpoint(daemon)

    async def status(_ep: object, which: str) -> list[dict[str, object]]:
        if which == "fib/list":
            return [{"name": "/a", "next_hop_records": [{"face_id": 300}, {"face_id": 301}]}]
        return [
            {"face_id": 300, "face_scope": "local"},
            {"face_id": 301, "face_scope": "local", "mtu": T.MAX_PACKET_SIZE},
        ]

    monkeypatch.setattr(mgmt_client, "status", status)
    try:
        assert await path_packet_limit(ep, from_uri("/a/f")) == T.MAX_PACKET_SIZE
    finally:
        ep.close()
