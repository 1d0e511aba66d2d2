"""Management end to end inside one process: a daemon with no sockets, an app on a memory face.

Each command goes through the real pipelines (FIB route to the management face, PIT, scope)
and the real dispatcher and modules; the app side reads the Data it gets back.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from ndn.app_support.nfd_mgmt import (
    ControlParameters,
    ControlParametersValue,
    CsInfo,
    FacePersistency,
    FaceQueryFilter,
    FaceQueryFilterValue,
    FaceStatusMsg,
    FibStatus,
    GeneralStatus,
    RibStatus,
    Strategy,
    StrategyChoiceMsg,
    parse_response,
)
from ndn.encoding import Name

from forwarder.daemon import ForwarderDaemon
from forwarder.face.face import Face
from forwarder.face.memory import MemoryTransport, memory_pair
from forwarder.mgmt.command_auth import CommandRejected
from icn.security.keys import Identity
from icn.security.signed_interest import make_signed_interest
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import encode_nack
from icn.wire.name import component_ends, from_uri, generic, segment, to_uri
from icn.wire.packet import parse_data, parse_interest
from icn.wire.signer import DIGEST_SHA256
from icn.wire.tlv import read_tl
from tests.waiting import wait_until


class App:
    """The far end of a memory face: sends packets, collects what the forwarder sends back."""

    def __init__(self, daemon: ForwarderDaemon) -> None:
        counters: Counter[str] = Counter()
        fwd_end, self.end = memory_pair(counters)
        self.face_id = daemon.faces.add(Face(fwd_end))
        self.received: list[bytes] = []
        self.end.bind(self.received.append, lambda: None)
        self.transport: MemoryTransport = self.end

    def send(self, wire: bytes) -> None:
        self.transport.send(wire)

    async def next_packet(self, timeout: float = 2.0) -> bytes:
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.received:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("no packet from the forwarder")
            await asyncio.sleep(0.005)
        return self.received.pop(0)

    async def command(self, module: str, verb: str, **params: Any) -> dict[str, Any]:
        name = _command_name(module, verb, **params)
        self.send(make_signed_interest(name, lifetime=1000))
        return await self.response()

    async def response(self) -> dict[str, Any]:
        wire = await self.next_packet()
        assert wire[0] == T.DATA, wire[:4].hex()
        return parse_response(_content(wire))  # type: ignore[no-any-return]

    async def dataset(self, module: str, what: str) -> bytes:
        self.send(make_interest(from_uri(f"/localhost/nfd/{module}/{what}"), can_be_prefix=True))
        return _content(await self.next_packet())


def _command_name(module: str, verb: str, **params: Any) -> bytes:
    cp = ControlParameters()
    cp.cp = ControlParametersValue()
    for k, v in params.items():
        if k == "strategy":
            cp.cp.strategy = Strategy()
            cp.cp.strategy.name = v
        else:
            setattr(cp.cp, k, v)
    return from_uri(f"/localhost/nfd/{module}/{verb}") + generic(bytes(cp.encode()))


def _content(wire: bytes) -> bytes:
    _t, pos, end = read_tl(wire, 0, len(wire))
    while pos < end:
        typ, vs, ve = read_tl(wire, pos, end)
        if typ == T.CONTENT:
            return wire[vs:ve]
        pos = ve
    raise AssertionError("no Content")


async def test_register_with_face_id_zero_routes_to_the_requesting_face(
    daemon: ForwarderDaemon,
) -> None:
    app = App(daemon)
    resp = await app.command("rib", "register", name="/app")
    assert resp["status_code"] == 200
    assert resp["face_id"] == app.face_id
    assert resp["flags"] == 1 and resp["origin"] == 0 and resp["cost"] == 0
    entry = daemon.fw.fib.get(from_uri("/app"))
    assert entry is not None and [nh.face_id for nh in entry.nexthops] == [app.face_id]

    other = App(daemon)
    other.send(make_interest(from_uri("/app/x")))
    got = await app.next_packet()
    assert got[0] == T.INTEREST
    app.send(make_data(from_uri("/app/x"), b"hi"))
    assert _content(await other.next_packet()) == b"hi"


async def test_response_is_named_as_the_command_and_not_cached(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    wire = make_signed_interest(_command_name("rib", "register", name="/n"), lifetime=1000)
    app.send(wire)
    data = await app.next_packet()
    assert parse_data(data).name == parse_interest(wire).name
    assert len(daemon.fw.cs) == 0


async def test_root_prefix_registers_and_unregisters(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    assert (await app.command("rib", "register", name=[]))["status_code"] == 200
    assert daemon.fw.fib.get(b"") is not None
    assert (await app.command("rib", "unregister", name=[]))["status_code"] == 200
    assert daemon.fw.fib.get(b"") is None


async def test_routes_of_a_closed_face_are_removed(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    await app.command("rib", "register", name="/gone", cost=7)
    assert len(daemon.rib) == 1
    app.transport.close()
    await wait_until(lambda: len(daemon.rib) == 0, 2)
    assert daemon.fw.fib.get(from_uri("/gone")) is None


async def test_expiration_period_removes_the_route(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    resp = await app.command("rib", "register", name="/brief", expiration_period=100)
    assert resp["expiration_period"] == 100
    assert daemon.fw.fib.get(from_uri("/brief")) is not None
    for _ in range(100):
        await asyncio.sleep(0.02)
        if daemon.fw.fib.get(from_uri("/brief")) is None:
            break
    assert daemon.fw.fib.get(from_uri("/brief")) is None


async def test_capture_flag_blocks_inherited_routes(daemon: ForwarderDaemon) -> None:
    a, b = App(daemon), App(daemon)
    await a.command("rib", "register", name="/p")
    await b.command("rib", "register", name="/p/q", flags=2)
    entry = daemon.fw.fib.get(from_uri("/p/q"))
    assert entry is not None and [nh.face_id for nh in entry.nexthops] == [b.face_id]


async def test_unknown_verb_and_module_get_501(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    assert (await app.command("rib", "frobnicate", name="/x"))["status_code"] == 501
    assert (await app.command("nosuch", "list"))["status_code"] == 501


async def test_non_ascii_module_name_gets_501_not_an_exception(
    daemon: ForwarderDaemon, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the daemon fuzz test: the 501 text names the module, and a non-UTF-8 one made
    the reply encoder raise in the event loop (no reply, a traceback, nothing counted)."""
    app = App(daemon)
    for module in (b"\xff\xfe", "modulé".encode()):
        name = from_uri("/localhost/nfd") + generic(module) + generic("verb")
        app.send(make_signed_interest(name, lifetime=1000))
        resp = await app.response()
        assert resp["status_code"] == 501
        assert "unknown management command" in resp["status_text"]
    assert "Traceback" not in caplog.text


async def test_missing_name_gets_400_and_unknown_face_410(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    assert (await app.command("rib", "register"))["status_code"] == 400
    resp = await app.command("rib", "register", name="/x", face_id=9999)
    assert resp["status_code"] == 410


async def test_prefix_over_32_components_gets_414(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    deep = "/" + "/".join(f"c{i}" for i in range(33))
    assert (await app.command("rib", "register", name=deep))["status_code"] == 414


async def test_unsigned_command_gets_403(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    app.send(make_interest(_command_name("rib", "register", name="/x"), lifetime=1000))
    assert (await app.response())["status_code"] == 403
    assert daemon.fw.fib.get(from_uri("/x")) is None


async def test_replayed_signature_nonce_gets_403(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    name = _command_name("rib", "register", name="/r")
    app.send(make_signed_interest(name, sig_nonce=b"12345678", lifetime=1000))
    assert (await app.response())["status_code"] == 200
    app.send(make_signed_interest(name, sig_nonce=b"12345678", lifetime=1000))
    assert (await app.response())["status_code"] == 403


async def test_localhost_command_from_non_local_face_is_dropped(
    daemon: ForwarderDaemon,
) -> None:
    app = App(daemon)
    face = daemon.faces.get(app.face_id)
    assert face is not None
    face.set_scope(False)
    before = daemon.counters["fw.drop_scope"]
    app.send(make_signed_interest(_command_name("rib", "register", name="/evil")))
    await wait_until(lambda: daemon.counters["fw.drop_scope"] == before + 1, 2)
    assert app.received == []
    assert daemon.fw.fib.get(from_uri("/evil")) is None


def _register_command(prefix: str, root: str = "/localhop") -> bytes:
    cp = ControlParameters()
    cp.cp = ControlParametersValue()
    cp.cp.name = prefix
    return from_uri(f"{root}/nfd/rib/register") + generic(bytes(cp.encode()))


async def test_localhop_rib_command_is_refused_without_a_trust_policy(
    daemon: ForwarderDaemon,
) -> None:
    # the hijack: a stranger's face (non-local) registers a prefix for itself, signed by a key
    # nobody trusts (or by none).  Without a trust policy for /localhop, 403 whatever the
    # signature, and nothing reaches the RIB or the FIB
    app = App(daemon)
    face = daemon.faces.get(app.face_id)
    assert face is not None
    face.set_scope(False)
    stranger = Identity.generate().signer()
    for signer in (stranger, DIGEST_SHA256):
        app.send(make_signed_interest(_register_command("/remote"), signer=signer, lifetime=1000))
        resp = await app.response()
        assert resp["status_code"] == 403 and "trust policy" in resp["status_text"], resp
    assert daemon.fw.fib.get(from_uri("/remote")) is None
    assert not daemon.rib.routes(from_uri("/remote"))
    assert daemon.counters["mgmt.refused_localhop_no_policy"] == 2
    # a face the forwarder deems local could send /localhost: its /localhop command is taken
    # as a local one (an app on a TCP address the forwarder counts in local_networks)
    face.set_scope(True)
    app.send(make_signed_interest(_register_command("/remote"), lifetime=1000))
    assert (await app.response())["status_code"] == 200
    assert daemon.fw.fib.get(from_uri("/remote")) is not None


async def test_a_digest_command_is_never_accepted_from_a_non_local_face(
    daemon: ForwarderDaemon,
) -> None:
    # even where a policy serves /localhop: a DigestSha256 "signature" names no signer
    seen: list[bytes] = []
    daemon.mgmt.dispatcher.localhop = lambda iv, cmd, face: seen.append(cmd.key_name)
    app = App(daemon)
    face = daemon.faces.get(app.face_id)
    assert face is not None
    face.set_scope(False)
    app.send(make_signed_interest(_register_command("/remote"), lifetime=1000))
    resp = await app.response()
    assert resp["status_code"] == 403 and "DigestSha256" in resp["status_text"], resp
    assert daemon.counters["mgmt.refused_digest_nonlocal"] == 1 and not seen
    assert daemon.fw.fib.get(from_uri("/remote")) is None
    # a keyed command goes to the policy, and runs when the policy accepts it
    signer = Identity.generate().signer()
    app.send(make_signed_interest(_register_command("/remote"), signer=signer, lifetime=1000))
    assert (await app.response())["status_code"] == 200 and len(seen) == 1
    assert daemon.fw.fib.get(from_uri("/remote")) is not None


async def test_a_localhop_policy_that_refuses_is_answered_403_and_runs_nothing(
    daemon: ForwarderDaemon,
) -> None:
    async def refuse(iv: object, cmd: object, face: int) -> None:
        await asyncio.sleep(0)  # as a policy fetching a certificate would
        raise CommandRejected(403, "signer outside the trust schema")

    daemon.mgmt.dispatcher.localhop = refuse
    app = App(daemon)
    face = daemon.faces.get(app.face_id)
    assert face is not None
    face.set_scope(False)
    signer = Identity.generate().signer()
    app.send(make_signed_interest(_register_command("/remote"), signer=signer, lifetime=1000))
    resp = await app.response()
    assert resp["status_code"] == 403 and "trust schema" in resp["status_text"]
    assert daemon.fw.fib.get(from_uri("/remote")) is None


async def test_fib_add_and_remove_nexthop(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    resp = await app.command("fib", "add-nexthop", name="/f", cost=5)
    assert resp["status_code"] == 200 and resp["face_id"] == app.face_id
    fib = FibStatus.parse(await app.dataset("fib", "list"))
    rows = {
        Name.to_str(e.name): [(r.face_id, r.cost) for r in e.next_hop_records] for e in fib.entries
    }
    assert rows["/f"] == [(app.face_id, 5)]
    await app.command("fib", "remove-nexthop", name="/f")
    assert daemon.fw.fib.get(from_uri("/f")) is None


async def test_strategy_set_list_unset(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    resp = await app.command(
        "strategy-choice", "set", name="/sync", strategy="/localhost/nfd/strategy/multicast"
    )
    assert resp["status_code"] == 200
    assert Name.to_str(resp["strategy"].name) == "/localhost/nfd/strategy/multicast/v=5"
    msg = StrategyChoiceMsg.parse(await app.dataset("strategy-choice", "list"))
    listed = {Name.to_str(s.name): Name.to_str(s.strategy.name) for s in msg.strategy_choices}
    assert listed["/sync"].startswith("/localhost/nfd/strategy/multicast")
    assert "/" in listed
    unknown = await app.command(
        "strategy-choice", "set", name="/x", strategy="/localhost/nfd/strategy/nope"
    )
    assert unknown["status_code"] == 404
    assert (await app.command("strategy-choice", "unset", name=[]))["status_code"] == 400
    assert (await app.command("strategy-choice", "unset", name="/sync"))["status_code"] == 200
    assert daemon.fw.strategy_choice.get(from_uri("/sync")) is None


async def test_cs_config_info_and_erase(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    await app.command("rib", "register", name="/c")
    consumer = App(daemon)
    for i in range(3):
        consumer.send(make_interest(from_uri(f"/c/{i}")))
        await app.next_packet()
        app.send(make_data(from_uri(f"/c/{i}"), b"x", freshness=10_000))
        await consumer.next_packet()
    raw = await app.dataset("cs", "info")
    typ, start, end = read_tl(raw, 0, len(raw))
    info = CsInfo.parse(raw[start:end])
    assert typ == 0x80 and info.n_cs_entries == 3 and info.flags == 3
    resp = await app.command("cs", "erase", name="/c", count=2)
    assert resp["count"] == 2 and resp["capacity"] == 2
    assert len(daemon.fw.cs) == 1
    resp = await app.command("cs", "config", capacity=10, flags=0, mask=1)
    assert resp["capacity"] == 10 and resp["flags"] == 2
    assert daemon.fw.cs.max_entries == 10 and not daemon.fw.cs.admit
    assert (await app.command("cs", "config", flags=1))["status_code"] == 400
    assert (await app.command("cs", "erase", name="/c", count=0))["status_code"] == 400


async def test_faces_list_query_and_errors(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    msg = FaceStatusMsg.parse(await app.dataset("faces", "list"))
    ids = {f.face_id for f in msg.face_status}
    assert {1, app.face_id} <= ids
    flt = FaceQueryFilter()
    flt.face_query_filter = FaceQueryFilterValue()
    flt.face_query_filter.face_id = app.face_id
    name = from_uri("/localhost/nfd/faces/query") + generic(bytes(flt.encode()))
    app.send(make_interest(name, can_be_prefix=True))
    only = FaceStatusMsg.parse(_content(await app.next_packet()))
    assert [f.face_id for f in only.face_status] == [app.face_id]
    assert (await app.command("faces", "destroy", face_id=1))["status_code"] == 400
    assert (await app.command("faces", "destroy"))["status_code"] == 400
    assert (await app.command("faces", "create", uri="unix:///tmp/x"))["status_code"] == 406
    assert (await app.command("faces", "create", uri="bogus"))["status_code"] == 400
    assert (await app.command("faces", "update", face_id=4242))["status_code"] == 404
    assert (await app.command("faces", "update", flags=1))["status_code"] == 400


async def test_faces_create_and_duplicate_409_then_destroy(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    uri = "udp4://127.0.0.1:9"  # discard port: connecting a UDP socket needs no listener
    resp = await app.command("faces", "create", uri=uri)
    assert resp["status_code"] == 200 and resp["uri"] == uri
    created = resp["face_id"]
    dup = await app.command("faces", "create", uri=uri)
    assert dup["status_code"] == 409 and dup["face_id"] == created
    assert (await app.command("faces", "destroy", face_id=created))["status_code"] == 200
    await wait_until(lambda: daemon.faces.get(created) is None, 2)


async def test_status_general_counts_and_rib_list(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    await app.command("rib", "register", name="/s", cost=3, expiration_period=60_000)
    status = GeneralStatus.parse(await app.dataset("status", "general"))
    assert status.n_in_interests >= 2 and status.n_fib_entries >= 3
    assert status.nfd_version
    rib = RibStatus.parse(await app.dataset("rib", "list"))
    entries = {Name.to_str(e.name): e.routes for e in rib.entries}
    (route,) = entries["/s"]
    assert route.face_id == app.face_id and route.cost == 3
    assert 0 < route.expiration_period <= 60_000


async def test_large_dataset_is_segmented_and_follow_ups_are_served(
    daemon: ForwarderDaemon,
) -> None:
    app = App(daemon)
    for i in range(400):
        daemon.fw.fib.add_nexthop(from_uri(f"/many/prefix-number-{i:04d}"), app.face_id)
    app.send(make_interest(from_uri("/localhost/nfd/fib/list"), can_be_prefix=True))
    first = await app.next_packet()
    first_name = parse_data(first).name
    assert "/v=" in to_uri(first_name) and to_uri(first_name).endswith("/seg=0")
    base = first_name[: component_ends(first_name)[-2]]
    content = bytearray(_content(first))
    last = _final_block(first)
    assert last >= 1
    for seg in range(1, last + 1):
        app.send(make_interest(base + segment(seg)))
        content += _content(await app.next_packet())
    fib = FibStatus.parse(bytes(content))
    names = {Name.to_str(e.name) for e in fib.entries}
    assert sum(n.startswith("/many/") for n in names) == 400


async def test_dataset_follow_up_for_an_unknown_version_is_dropped(
    daemon: ForwarderDaemon,
) -> None:
    app = App(daemon)
    app.send(make_interest(from_uri("/localhost/nfd/fib/list/v=1/seg=0")))
    await wait_until(lambda: daemon.counters["mgmt.dataset_miss"] == 1, 2)
    assert app.received == []


def _final_block(wire: bytes) -> int:
    _t, pos, end = read_tl(wire, 0, len(wire))
    while pos < end:
        typ, vs, ve = read_tl(wire, pos, end)
        if typ == T.META_INFO:
            p = vs
            while p < ve:
                t2, s2, e2 = read_tl(wire, p, ve)
                if t2 == T.FINAL_BLOCK_ID:
                    _t3, s3, e3 = read_tl(wire, s2, e2)
                    return int.from_bytes(wire[s3:e3], "big")
                p = e2
        pos = ve
    return -1


async def test_digest_command_times_are_ordered_per_face_but_nonces_globally(
    daemon: ForwarderDaemon,
) -> None:
    a, b = App(daemon), App(daemon)
    when = int(time.time() * 1000)
    # two apps signing in the same millisecond: both accepted (NFD would refuse the second)
    a.send(make_signed_interest(_command_name("rib", "register", name="/a"), sig_time_ms=when))
    b.send(make_signed_interest(_command_name("rib", "register", name="/b"), sig_time_ms=when))
    assert (await a.response())["status_code"] == 200
    assert (await b.response())["status_code"] == 200
    # the same app going back in time is refused
    a.send(make_signed_interest(_command_name("rib", "register", name="/c"), sig_time_ms=when))
    assert (await a.response())["status_code"] == 403
    # a nonce one face used, replayed by another face, is refused
    name = _command_name("rib", "register", name="/d")
    a.send(make_signed_interest(name, sig_nonce=b"nonce-01", sig_time_ms=when + 5))
    assert (await a.response())["status_code"] == 200
    b.send(make_signed_interest(name, sig_nonce=b"nonce-01", sig_time_ms=when + 6))
    assert (await b.response())["status_code"] == 403


async def test_face_persistency_enum_from_python_ndn_is_understood(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    resp = await app.command(
        "faces", "create", uri="udp4://127.0.0.1:9", face_persistency=FacePersistency.PERMANENT
    )
    assert resp["status_code"] == 200
    assert resp["face_persistency"] == FacePersistency.PERMANENT
    flt = FaceQueryFilter()
    flt.face_query_filter = FaceQueryFilterValue()
    flt.face_query_filter.face_persistency = FacePersistency.PERMANENT
    name = from_uri("/localhost/nfd/faces/query") + generic(bytes(flt.encode()))
    app.send(make_interest(name, can_be_prefix=True))
    rows = FaceStatusMsg.parse(_content(await app.next_packet())).face_status
    assert [f.face_id for f in rows] == [1, resp["face_id"]]  # the management face too
    upd = await app.command(
        "faces", "update", face_id=resp["face_id"], face_persistency=FacePersistency.PERSISTENT
    )
    assert upd["status_code"] == 200 and upd["face_persistency"] == FacePersistency.PERSISTENT
    on_demand = await app.command(
        "faces", "create", uri="udp4://127.0.0.1:10", face_persistency=FacePersistency.ON_DEMAND
    )
    assert on_demand["status_code"] == 406


async def test_fuzzed_control_parameters_never_break_the_dispatcher(
    daemon: ForwarderDaemon, caplog: pytest.LogCaptureFixture
) -> None:
    """Signed commands carrying mangled ControlParameters, to every module: each gets a
    ControlResponse or is dropped and counted; no handler error, no traceback."""
    import random

    rng = random.Random(3)
    app = App(daemon)
    verbs = [(m, v) for (m, v) in daemon.mgmt.dispatcher.commands] if daemon.mgmt else []
    assert verbs
    good = bytearray(bytes.fromhex("680b0706080161080162690103"))
    answered = dropped = 0
    for i in range(300):
        params = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            params[rng.randrange(len(params))] = rng.randrange(256)
        module, verb = verbs[i % len(verbs)]
        name = from_uri(f"/localhost/nfd/{module.decode()}/{verb.decode()}") + generic(
            bytes(params)
        )
        before = daemon.counters["mgmt.drop_malformed_command"]
        app.send(make_signed_interest(name, lifetime=1000))
        for _ in range(400):  # bounded: 2 s
            if app.received or daemon.counters["mgmt.drop_malformed_command"] > before:
                break
            await asyncio.sleep(0.005)
        if app.received:
            resp = await app.response()
            assert resp["status_code"] in (200, 400, 403, 404, 406, 409, 410, 414, 504)
            answered += 1
        else:
            assert daemon.counters["mgmt.drop_malformed_command"] == before + 1
            dropped += 1
    assert answered and answered + dropped == 300
    assert daemon.counters["mgmt.handler_error"] == 0
    assert "Traceback" not in caplog.text and "failed" not in caplog.text


async def test_management_fetches_from_the_face_a_command_came_on(
    daemon: ForwarderDaemon,
) -> None:
    # a certificate for a /localhop command's trust policy comes from the commanding face
    # itself (NFD's direct fetch), whatever the FIB says: no route to /peer exists here
    peer = App(daemon)
    mgmt = daemon.mgmt
    name = from_uri("/peer/KEY/k1")
    got = asyncio.ensure_future(mgmt.fetch_from(peer.face_id, name, 1000))
    wire = await peer.next_packet()
    iv = parse_interest(wire)
    assert iv.name == name and iv.can_be_prefix
    cert = make_data(from_uri("/peer/KEY/k1/self/v=1"), b"cert")
    peer.send(cert)
    assert await got == cert
    # a Nack ends a fetch with None at once
    got = asyncio.ensure_future(mgmt.fetch_from(peer.face_id, from_uri("/peer/KEY/k2"), 1000))
    asked = await peer.next_packet()
    peer.send(encode_nack(asked, T.NACK_NO_ROUTE))
    assert await got is None
    # silence: None at the lifetime; an unknown face: None (dropped by the forwarder)
    assert await mgmt.fetch_from(peer.face_id, from_uri("/peer/KEY/k3"), 50) is None
    assert await mgmt.fetch_from(9999, from_uri("/peer/KEY/k4"), 50) is None
    assert daemon.counters["mgmt.fetch"] == 4 and daemon.counters["mgmt.fetch_timeout"] == 2
    assert not mgmt._fetches  # nothing left waiting
