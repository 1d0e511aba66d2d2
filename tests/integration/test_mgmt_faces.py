"""faces/create over TCP: a face to a live TCP peer, a duplicate, and an unreachable peer;
faces/channels of a daemon with real listeners."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.mgmt.channel_module import ChannelStatusMsg
from tests.unit.mgmt.test_management import App


@pytest.fixture
async def daemon() -> AsyncIterator[ForwarderDaemon]:
    d = ForwarderDaemon(config_from_dict({"listen": {}}))
    await d.start()
    try:
        yield d
    finally:
        await d.stop()


async def test_tcp4_face_create_duplicate_destroy_and_refused(daemon: ForwarderDaemon) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def on_client(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(w)

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = App(daemon)
    try:
        uri = f"tcp4://127.0.0.1:{port}"
        resp = await app.command("faces", "create", uri=uri)
        assert resp["status_code"] == 200 and resp["uri"] == uri
        face = daemon.faces.get(resp["face_id"])
        assert face is not None and not face.on_demand
        for _ in range(100):
            if accepted:
                break
            await asyncio.sleep(0.01)
        assert accepted, "the peer never saw the connection"
        dup = await app.command("faces", "create", uri=f"tcp://127.0.0.1:{port}")
        assert dup["status_code"] == 409 and dup["face_id"] == resp["face_id"]
        gone = await app.command("faces", "destroy", face_id=resp["face_id"])
        assert gone["status_code"] == 200
    finally:
        server.close()
        for w in accepted:
            w.close()
        await server.wait_closed()
    refused = await app.command("faces", "create", uri=f"tcp4://127.0.0.1:{port}")
    assert refused["status_code"] == 504
    assert refused["status_text"].count(f"127.0.0.1:{port}") == 1


async def test_faces_channels_lists_the_daemons_real_listeners(workdir: Path) -> None:
    sock = workdir / "fwd.sock"
    cfg = {"listen": {"udp": ["127.0.0.1:0"], "tcp": ["127.0.0.1:0"], "unix": str(sock)}}
    d = ForwarderDaemon(config_from_dict(cfg))
    await d.start()
    try:
        msg = ChannelStatusMsg.parse(await App(d).dataset("faces", "channels"))
        got = [bytes(ch.local_uri).decode() for ch in msg.channel_status]
        assert got == d.listen_uris  # the ports the kernel chose, as the daemon logged them
        assert [u.split("://")[0] for u in got] == ["udp4", "tcp4", "unix"]
        assert got[2] == f"unix://{sock}"
    finally:
        await d.stop()
