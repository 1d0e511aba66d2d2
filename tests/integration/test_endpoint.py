"""The app endpoint against the real forwarder, started in this process on loopback.

Producers register through the forwarder's management (rib/register), consumers express over
Unix, TCP and UDP; misbehaving peers are played by small raw socket servers.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest
from ndn.encoding import parse_interest as ndn_parse_interest

from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane import mgmt_client as mgmt
from icn.dataplane.app_protocols import MAX_FRAME
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.segments import data_content
from icn.errors import (
    CommandFailed,
    ForwarderUnreachable,
    InterestCanceled,
    InterestNack,
    InterestTimeout,
    TooManyPending,
)
from icn.sockbuf import UNIX_SEND_BUFFER
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import encode_lp, encode_nack, parse_lp
from icn.wire.name import from_uri, implicit_digest_component, segment, version
from icn.wire.packet import InterestView, parse_data, parse_interest
from tests.chaos.harness import CpuLoad
from tests.waiting import wait_until

Reply = Callable[[bytes], None]
Connect = Callable[[str], Awaitable[Endpoint]]
TRANSPORTS = ("unix", "tcp", "udp")


@pytest.fixture
async def fwd(workdir: Path) -> AsyncIterator[ForwarderDaemon]:
    listen = {"unix": str(workdir / "fwd.sock"), "tcp": ["127.0.0.1:0"], "udp": ["127.0.0.1:0"]}
    daemon = ForwarderDaemon(config_from_dict({"listen": listen}))
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()


def uri_of(daemon: ForwarderDaemon, kind: str) -> str:
    return next(u for u in daemon.listen_uris if u.startswith(kind))


@pytest.fixture
async def connect(fwd: ForwarderDaemon, cpu: CpuLoad) -> AsyncIterator[Connect]:
    opened: list[Endpoint] = []

    async def open_(kind: str = "unix") -> Endpoint:
        ep = await Endpoint.connect(uri_of(fwd, kind))
        opened.append(ep)
        return ep

    yield open_
    for ep in opened:
        ep.close()
        async with asyncio.timeout(cpu.budget(2)):
            await ep.wait_closed()


def echo(content: bytes = b"hello") -> Callable[[InterestView, Reply], None]:
    def handler(iv: InterestView, reply: Reply) -> None:
        reply(make_data(iv.name, content, freshness=1000))

    return handler


def segment_of(iv: InterestView) -> int:
    """The segment number an Interest asks for (0 for the first, CanBePrefix, Interest)."""
    ends = iv.name_ends
    last = iv.name[ends[-2] if len(ends) > 1 else 0 :]
    return int.from_bytes(last[2:]) if last[0] == T.COMP_SEGMENT else 0


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_express_and_serve_over_each_transport(kind: str, connect: Connect) -> None:
    producer, consumer = await connect(kind), await connect(kind)
    await producer.serve("/p", echo())
    assert producer.face_id is not None and producer.face_id >= 256
    data = await consumer.express("/p/x", timeout=5)
    assert data.name == from_uri("/p/x") and data_content(data) == b"hello"
    assert data.wire[0] == T.DATA
    signed = await consumer.express("/p/s", signed=True, app_params=b"args", timeout=5)
    assert signed.name[: len(from_uri("/p/s"))] == from_uri("/p/s")
    assert producer.counters["in_interest"] == 2 and consumer.counters["in_data"] == 2


async def test_unix_endpoint_asks_for_a_send_buffer_of_a_few_segments(connect: Connect) -> None:
    # the default (208 KiB) made each 1 MiB segment five wake-ups of the forwarder
    # (bench/bulk.py 495 -> 600-630 MB/s); TCP keeps the kernel's own tuning
    unix, tcp = await connect("unix"), await connect("tcp")

    def sndbuf(ep: Endpoint) -> int:
        sock = cast(asyncio.Transport, ep._transport).get_extra_info("socket")
        return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))

    # Linux reports twice what it accounts; without CAP_NET_ADMIN, wmem_max caps the request
    cap = UNIX_SEND_BUFFER if os.geteuid() == 0 else min(UNIX_SEND_BUFFER, wmem_max())
    assert sndbuf(unix) >= 2 * cap
    assert sndbuf(tcp) < 2 * UNIX_SEND_BUFFER  # TCP's own (net.ipv4.tcp_wmem), left alone


def wmem_max() -> int:
    return int(Path("/proc/sys/net/core/wmem_max").read_text())


async def test_signed_interest_reaches_the_producer_intact(connect: Connect) -> None:
    producer, consumer = await connect("unix"), await connect("tcp")
    seen: list[bytes] = []

    def handler(iv: InterestView, reply: Reply) -> None:
        seen.append(iv.wire)
        reply(make_data(iv.name, b"ok"))

    await producer.serve("/rpc", handler)
    await consumer.express("/rpc/f", signed=True, app_params=b"\x01\x02", timeout=5)
    _, _, params, sig = ndn_parse_interest(seen[0])
    assert bytes(params) == b"\x01\x02" and sig.signature_info.signature_time


async def test_nack_no_route(connect: Connect) -> None:
    consumer = await connect("unix")
    with pytest.raises(InterestNack) as info:
        await consumer.express("/nobody/here", timeout=5)
    assert info.value.reason == T.NACK_NO_ROUTE and info.value.reason_name == "NoRoute"
    assert "/nobody/here" in str(info.value)


async def test_timeout_after_retries_each_lifetime_respected(
    connect: Connect, cpu: CpuLoad
) -> None:
    producer, consumer = await connect("unix"), await connect("tcp")
    nonces: list[bytes | None] = []
    await producer.serve("/silent", lambda iv, reply: nonces.append(iv.nonce))
    cpu.budget(2.0)  # the load before the timed part counts too (the larger is kept)
    start = time.monotonic()
    with pytest.raises(InterestTimeout) as info:
        await consumer.express("/silent/x", lifetime_ms=200, retries=2)
    elapsed = time.monotonic() - start
    # each of the three lifetimes waited out (0.6 s), and not much more than that: 2 s on a
    # quiet machine, as much more as the CPU was slower
    assert info.value.attempts == 3 and 0.59 <= elapsed < cpu.budget(2.0)
    assert consumer.counters["retransmitted"] == 2
    assert len(nonces) >= 2 and len(set(nonces)) == len(nonces)
    with pytest.raises(InterestTimeout):  # the overall bound cuts retries short
        await consumer.express("/silent/y", lifetime_ms=1000, retries=5, timeout=0.3)


async def test_can_be_prefix_and_implicit_digest(connect: Connect) -> None:
    producer, consumer = await connect("unix"), await connect("udp")
    exact = make_data(from_uri("/m/exact"), b"E")

    def handler(iv: InterestView, reply: Reply) -> None:
        if iv.name.startswith(from_uri("/m/exact")):
            reply(exact)
        else:
            reply(make_data(iv.name + version(7), b"V"))

    await producer.serve("/m", handler)
    longer = await consumer.express("/m/obj", can_be_prefix=True, timeout=5)
    assert longer.name == from_uri("/m/obj") + version(7) and data_content(longer) == b"V"
    with pytest.raises(InterestTimeout):  # a longer name does not satisfy an exact Interest
        await consumer.express("/m/other", lifetime_ms=300)
    by_digest = await consumer.express(
        from_uri("/m/exact") + implicit_digest_component(exact), timeout=5
    )
    assert by_digest.wire == exact


async def test_concurrent_expresses_of_one_name_all_get_the_data(connect: Connect) -> None:
    producer, consumer = await connect("unix"), await connect("unix")
    loop = asyncio.get_running_loop()
    # answer late, so that every Interest is pending when the Data comes back
    await producer.serve("/c", lambda iv, reply: loop.call_later(0.1, echo(b"same"), iv, reply))
    results = await asyncio.gather(*(consumer.express("/c/one", timeout=5) for _ in range(6)))
    assert {data_content(d) for d in results} == {b"same"}
    assert consumer.counters["timeout"] == 0 and consumer.pending == 0


async def test_missing_forwarder_is_reported_in_one_line(workdir: Path) -> None:
    uri = f"unix://{workdir}/none.sock"
    with pytest.raises(ForwarderUnreachable) as info:
        await Endpoint.connect(uri)
    assert str(info.value) == (
        f"no forwarder at {uri} (is `icn fwd` running? set NDN_CLIENT_TRANSPORT)"
    )
    with pytest.raises(ForwarderUnreachable):
        await Endpoint.connect("tcp://127.0.0.1:1")
    async with await Endpoint.connect("udp://127.0.0.1:1") as ep:  # UDP learns on first send
        with pytest.raises(ForwarderUnreachable):
            await ep.express("/x", timeout=3)


async def test_connect_without_uri_follows_ndn_client_transport(
    fwd: ForwarderDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NDN_CLIENT_TRANSPORT", uri_of(fwd, "tcp"))
    async with await Endpoint.connect() as ep:
        assert ep.uri == uri_of(fwd, "tcp") and ep.is_local
        with pytest.raises(InterestNack):
            await ep.express("/unrouted", timeout=5)


async def test_close_cancels_pending(connect: Connect) -> None:
    producer, consumer = await connect("unix"), await connect("unix")
    arrived: list[object] = []
    await producer.serve("/slow", lambda iv, reply: arrived.append(iv))
    pending = asyncio.ensure_future(consumer.express("/slow/x"))
    await wait_until(lambda: arrived)  # pending: the producer has it and never answers
    consumer.close()
    with pytest.raises(InterestCanceled):
        await pending


async def test_fetch_segments_of_a_1mb_object(connect: Connect) -> None:
    producer, consumer = await connect("unix"), await connect("tcp")
    blob = os.urandom(1 << 20)
    chunks = [blob[i : i + 8000] for i in range(0, len(blob), 8000)]
    base = from_uri("/big/file") + version(1)

    def handler(iv: InterestView, reply: Reply) -> None:
        n = segment_of(iv)
        fb = segment(len(chunks) - 1)
        reply(make_data(base + segment(n), chunks[n], final_block_id=fb, freshness=1000))

    await producer.serve("/big", handler)
    async with asyncio.timeout(30):
        assert await consumer.fetch_segments("/big/file", window=16) == blob
    assert producer.counters["in_interest"] == len(chunks) and consumer.pending == 0


async def test_fetch_segments_when_only_the_last_segment_says_it_is_last(connect: Connect) -> None:
    producer, consumer = await connect("udp"), await connect("udp")
    chunks = [bytes([i]) * 1000 for i in range(5)]

    def handler(iv: InterestView, reply: Reply) -> None:
        n = segment_of(iv)
        if n < len(chunks):  # segments past the end get no answer
            fb = segment(n) if n == len(chunks) - 1 else None
            reply(make_data(from_uri("/obj") + segment(n), chunks[n], final_block_id=fb))

    await producer.serve("/obj", handler)
    got = await consumer.fetch_segments("/obj", window=8, lifetime_ms=500, timeout=10)
    assert got == b"".join(chunks) and consumer.pending == 0


class Misbehaving(asyncio.Protocol):
    """A fake forwarder: garbage, then a proper answer to the first Interest; to the second,
    a TLV header nobody can frame (type 0)."""

    def __init__(self, garbage: bytes) -> None:
        self.garbage = garbage
        self.seen = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.seen += 1
        if self.seen == 1:
            self.transport.write(self.garbage)
            self.transport.write(make_data(parse_interest(data).name, b"fine"))
        else:
            self.transport.write(b"\x00\x01\x00")


async def test_malformed_input_is_counted_not_raised(workdir: Path) -> None:
    errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
    interest = bytes.fromhex("050b 0703 0801 61 0a04 01020304")
    garbage = b"".join(
        [
            bytes.fromhex("0503 ffffff"),  # Interest with a broken Name
            encode_lp(None, congestion_mark=1),  # LpPacket without Fragment
            encode_lp(b"\x06\x00", sequence=1, frag_index=0, frag_count=2),  # a fragment
            bytes.fromhex("6403 510100"),  # LpPacket with a 1-octet Sequence
            encode_nack(interest, T.NACK_DUPLICATE),  # Nack for nothing pending
            make_data(from_uri("/unasked"), b""),  # unsolicited Data
            bytes.fromhex("7001 00"),  # unknown top-level type
            # a frame one byte over the largest a forwarder sends on a local face: skipped
            b"\x06\xfe" + (MAX_FRAME - 5).to_bytes(4, "big") + bytes(MAX_FRAME - 5),
        ]
    )
    path = str(workdir / "bad.sock")
    server = await asyncio.get_running_loop().create_unix_server(lambda: Misbehaving(garbage), path)
    try:
        async with await Endpoint.connect(f"unix://{path}") as ep:
            data = await ep.express("/a", timeout=5)
            assert data_content(data) == b"fine"
            c = ep.counters
            assert c["drop_malformed"] == 2 and c["drop_lp_no_fragment"] == 1
            assert c["drop_lp_fragment"] == 1 and c["drop_unsolicited_nack"] == 1
            assert c["drop_unsolicited_data"] == 1 and c["drop_unknown_type"] == 1
            assert c["drop_oversize"] == 1
            with pytest.raises(InterestCanceled, match="bad TLV header"):
                await ep.express("/b", timeout=5)  # the stream cannot be trusted any more
            assert ep.closed and c["drop_bad_framing"] == 1
    finally:
        server.close()
        await server.wait_closed()
    assert errors == []


async def test_register_unregister_and_refused_commands(connect: Connect) -> None:
    producer, consumer = await connect("unix"), await connect("tcp")
    served = await producer.serve("/r", echo())
    assert data_content(await consumer.express("/r/1", timeout=5)) == b"hello"
    body = await mgmt.command(consumer, "rib", "register", name="/q", cost=5)
    assert body["name"] == "/q" and body["cost"] == 5 and body["face_id"] >= 256
    with pytest.raises(CommandFailed) as info:
        await mgmt.command(consumer, "rib", "no-such-verb")
    assert info.value.status == 501 and "rib/no-such-verb" in str(info.value)
    with pytest.raises(CommandFailed) as info:  # refused: the handler is not left behind
        await producer.serve("/x" * 40, echo())
    assert info.value.status >= 400 and len(producer.handlers) == 1
    created = await mgmt.command(consumer, "faces", "create", uri="udp4://127.0.0.1:9")
    with pytest.raises(CommandFailed) as info:  # 409 carries the existing face
        await mgmt.command(consumer, "faces", "create", uri="udp4://127.0.0.1:9")
    assert info.value.status == 409 and info.value.body["face_id"] == created["face_id"]
    await served.close()
    with pytest.raises(InterestNack):
        await consumer.express("/r/2", timeout=5)


async def test_status_datasets(connect: Connect, fwd: ForwarderDaemon) -> None:
    producer = await connect("unix")
    await producer.serve("/d", echo())
    general = await mgmt.status(producer, "status/general")
    assert general["nfd_version"] and general["n_fib_entries"] >= 1
    faces = await mgmt.status(producer, "faces/list")
    assert producer.face_id in {f["face_id"] for f in faces}
    fib = {e["name"]: e for e in await mgmt.status(producer, "fib/list")}
    assert fib["/d"]["next_hop_records"] == [{"face_id": producer.face_id, "cost": 0}]
    rib = {e["name"]: e for e in await mgmt.status(producer, "rib/list")}
    assert rib["/d"]["routes"][0]["face_id"] == producer.face_id
    choices = await mgmt.status(producer, "strategy-choice/list")
    assert "/" in {c["name"] for c in choices}
    assert "capacity" in await mgmt.status(producer, "cs/info")
    # the raw dataset is the reassembled content, every record there
    raw = await mgmt.dataset(producer, "faces", "list")
    assert {f["face_id"] for f in mgmt.parse_face_list(raw)} == {f["face_id"] for f in faces}


async def test_dispatch_by_longest_prefix_async_handlers_and_pit_tokens(
    workdir: Path, cpu: CpuLoad
) -> None:
    """A fake forwarder pushes Interests at the endpoint and reads back what it answers."""
    within = cpu.budget(2)  # each wait below: 2 s on a quiet machine
    replies: asyncio.Queue[bytes] = asyncio.Queue()
    peer: list[asyncio.Transport] = []

    class Fake(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            peer.append(cast(asyncio.Transport, transport))

        def data_received(self, data: bytes) -> None:
            replies.put_nowait(data)  # one small packet per write on loopback

    path = str(workdir / "fake.sock")
    server = await asyncio.get_running_loop().create_unix_server(Fake, path)

    async def late(iv: InterestView, reply: Reply) -> None:
        await asyncio.sleep(0.01)  # the thing tested: a handler that answers later
        reply(make_data(iv.name, b"late"))

    def broken(iv: InterestView, reply: Reply) -> None:
        raise RuntimeError("handler bug")

    try:
        async with await Endpoint.connect(f"unix://{path}", max_pending=1) as ep:
            ep.handlers.add("/a", echo(b"short"))
            ep.handlers.add("/a/b", echo(b"long"))
            ep.handlers.add("/late", late)
            ep.handlers.add("/broken", broken)
            async with asyncio.timeout(within):
                while not peer:  # the server side accepts a moment after the client connects
                    await asyncio.sleep(0.005)
            send = peer[0].write

            async def ask(name: str, token: bytes | None = None) -> bytes:
                wire = make_interest(from_uri(name))
                send(wire if token is None else encode_lp(wire, pit_token=token))
                async with asyncio.timeout(within):
                    return await replies.get()

            deepest = parse_data(await ask("/a/b/c"))
            assert deepest.name == from_uri("/a/b/c") and data_content(deepest) == b"long"
            assert b"short" in await ask("/a/x")
            assert b"late" in await ask("/late/1")
            lp = parse_lp(await ask("/a/t", token=b"\x01\x02\x03"))
            assert lp.pit_token == b"\x01\x02\x03" and lp.fragment is not None
            send(make_interest(from_uri("/broken/1")))
            send(make_interest(from_uri("/nothing")))
            assert b"short" in await ask("/a/after")  # still serving
            assert ep.counters["handler_error"] == 1 and ep.counters["drop_no_handler"] == 1
            ep.handlers.remove("/a/b")
            assert b"short" in await ask("/a/b/c")
            first = asyncio.ensure_future(ep.express("/p", lifetime_ms=500))
            await asyncio.sleep(0)  # one turn of the loop: the first Interest is pending
            with pytest.raises(TooManyPending):
                await ep.express("/q")
            first.cancel()
    finally:
        server.close()
        await server.wait_closed()
