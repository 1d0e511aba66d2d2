"""Every command reply as NFD's own tools check it, and the faces/channels dataset.

ndn-cxx's ControlCommand classes (which nfdc uses) check each reply's ControlParameters: some
fields required, some optional, every other one forbidden ("Uri is forbidden but present"), and a
FaceId, where there is one, not 0.  The table below states those rules per command (from ndn-cxx's
``mgmt/nfd/control-command.cpp``); replies are decoded with python-ndn's models.
"""

from __future__ import annotations

from typing import Any

from ndn.app_support.nfd_mgmt import ControlParametersValue, FacePersistency
from ndn.encoding import parse_tl_num

from forwarder.daemon import ForwarderDaemon
from forwarder.mgmt.channel_module import ChannelStatusMsg
from tests.unit.mgmt.test_management import App

FACE = ("face_id",)
CONGESTION = ("base_congestion_mark_interval", "default_congestion_threshold", "mtu")
# command: (required fields, optional fields) of a successful reply
REPLY_FIELDS: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("faces", "create"): (("face_id", "uri", "local_uri", "face_persistency", "flags"), CONGESTION),
    ("faces", "update"): (("face_id", "face_persistency", "flags"), CONGESTION),
    ("faces", "destroy"): (FACE, ()),
    ("fib", "add-nexthop"): (("name", "face_id", "cost"), ()),
    ("fib", "remove-nexthop"): (("name", "face_id"), ()),
    ("cs", "config"): (("capacity", "flags"), ()),
    ("cs", "erase"): (("name", "count"), ("capacity",)),
    ("strategy-choice", "set"): (("name", "strategy"), ()),
    ("strategy-choice", "unset"): (("name",), ()),
    ("rib", "register"): (("name", "face_id", "origin", "cost", "flags"), ("expiration_period",)),
    ("rib", "unregister"): (("name", "face_id", "origin"), ()),
}
FIELDS = [f.name for f in ControlParametersValue._encoded_fields]


def check_as_ndn_cxx(command: tuple[str, str], reply: dict[str, Any]) -> None:
    required, optional = REPLY_FIELDS[command]
    present = {f for f in FIELDS if reply[f] is not None}
    missing = set(required) - present
    forbidden = present - set(required) - set(optional)
    assert not missing, f"{'/'.join(command)} reply: {sorted(missing)} required but missing"
    assert not forbidden, f"{'/'.join(command)} reply: {sorted(forbidden)} forbidden but present"
    if "face_id" in required:
        assert reply["face_id"] != 0, f"{'/'.join(command)} reply: FaceId must be valid"


async def test_every_command_reply_passes_ndn_cxx_checks(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    uri = "udp4://127.0.0.1:9"  # discard port: connecting a UDP socket needs no listener
    replies: list[tuple[tuple[str, str], dict[str, Any]]] = []

    async def run(module: str, verb: str, **params: Any) -> dict[str, Any]:
        reply = await app.command(module, verb, **params)
        assert reply["status_code"] == 200, (module, verb, reply)
        replies.append(((module, verb), reply))
        return reply

    created = (await run("faces", "create", uri=uri))["face_id"]
    # nfdc face create <existing uri> persistency permanent: 409, then faces/update
    exists = await app.command("faces", "create", uri=uri)
    assert exists["status_code"] == 409
    check_as_ndn_cxx(("faces", "create"), exists)  # nfdc reads the existing face from it
    update = await run("faces", "update", face_id=created, face_persistency=2)
    assert update["face_persistency"] == FacePersistency.PERMANENT
    assert update["base_congestion_mark_interval"] == 100_000_000  # 100 ms, as NFD's default
    assert update["default_congestion_threshold"] == 65_536
    await run("faces", "update")  # FaceId 0: the requesting face
    await run("fib", "add-nexthop", name="/r", face_id=created, cost=5)
    await run("fib", "remove-nexthop", name="/r", face_id=created)
    await run("rib", "register", name="/r", face_id=created, expiration_period=60_000)
    await run("rib", "register", name="/r2")
    await run("rib", "unregister", name="/r", face_id=created)
    await run("strategy-choice", "set", name="/r", strategy="/localhost/nfd/strategy/multicast")
    await run("strategy-choice", "unset", name="/r")
    await run("cs", "config", capacity=100)
    await run("cs", "erase", name="/r")
    await run("faces", "destroy", face_id=created)
    assert {c for c, _ in replies} == set(REPLY_FIELDS)
    for command, reply in replies:
        check_as_ndn_cxx(command, reply)


async def test_unsupported_scheme_is_406_and_a_malformed_uri_400(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    for uri in ("ether://[01:02:03:04:05:06]", "dev://eth0", "unix:///tmp/x", "foo://bar"):
        reply = await app.command("faces", "create", uri=uri)
        assert reply["status_code"] == 406, (uri, reply)
        assert uri.split("://")[0] in reply["status_text"]
    for uri in ("bogus", "udp4://", "udp4://127.0.0.1:99999", "://x"):
        assert (await app.command("faces", "create", uri=uri))["status_code"] == 400, uri


class FakeListener:
    def __init__(self, local_uri: str) -> None:
        self.local_uri = local_uri


async def test_faces_channels_lists_one_channel_per_listener(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    assert ChannelStatusMsg.parse(await app.dataset("faces", "channels")).channel_status == []
    uris = ["udp4://127.0.0.1:6363", "tcp4://127.0.0.1:6363", "unix:///run/nfd/nfd.sock"]
    daemon.faces.listeners.extend(FakeListener(u) for u in uris)  # type: ignore[misc]
    try:
        content = await app.dataset("faces", "channels")
    finally:
        del daemon.faces.listeners[-3:]
    # as nfdc reads it: a sequence of ChannelStatus (130), each with one LocalUri (129)
    pos, got = 0, []
    while pos < len(content):
        typ = parse_tl_num(content, pos)
        pos += typ[1]
        length = parse_tl_num(content, pos)
        pos += length[1]
        assert typ[0] == 130
        inner = content[pos : pos + length[0]]
        assert parse_tl_num(inner, 0)[0] == 129
        got.append(bytes(inner[2:]).decode())
        pos += length[0]
    assert got == uris
