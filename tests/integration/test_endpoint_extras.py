"""The app endpoint's in-memory face, serve, segmented publish, verification hook and the
consumer side of reflexive forwarding, against a real forwarder in this process."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest

from apps.inproc import attach_endpoint
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.face.memory import memory_pair
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import data_content
from icn.errors import CommandFailed, InterestCanceled, InterestTimeout, ValidationError
from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri, to_uri
from icn.wire.packet import DataView, InterestView, parse_interest
from icn.wire.reflexive import new_rnp, reflexive_key, trigger_name
from tests.chaos.harness import CpuLoad
from tests.virtual_time import virtual_time
from tests.waiting import wait_until


@pytest.fixture
async def daemon() -> AsyncIterator[ForwarderDaemon]:
    d = ForwarderDaemon(config_from_dict({"listen": {"udp": ["127.0.0.1:0"]}}))
    await d.start()
    try:
        yield d
    finally:
        await d.stop()


async def test_in_memory_face_serves_and_expresses(daemon: ForwarderDaemon, cpu: CpuLoad) -> None:
    producer, consumer = attach_endpoint(daemon), attach_endpoint(daemon)
    try:
        await producer.serve("/mem", lambda iv, reply: reply(make_data(iv.name, b"hi")))
        assert producer.face_id is not None and producer.face_id >= 256
        data = await consumer.express("/mem/x", timeout=5)
        assert data_content(data) == b"hi"
        assert daemon.counters["fw.out_data"] >= 1
    finally:
        producer.close()
        consumer.close()
    async with asyncio.timeout(cpu.budget(2)):
        await producer.wait_closed()
    # the face went away with the endpoint, and its route with it
    await wait_until(lambda: daemon.fw.fib.get(from_uri("/mem")) is None, cpu.budget(2))


async def test_handler_may_answer_later(daemon: ForwarderDaemon) -> None:
    producer, consumer = attach_endpoint(daemon), attach_endpoint(daemon)

    def later(iv: InterestView, reply: object) -> None:
        asyncio.get_running_loop().call_later(
            0.2,
            lambda: reply(make_data(iv.name, b"late")),  # type: ignore[operator]
        )

    await producer.serve("/later", later)
    data = await consumer.express("/later/x", lifetime_ms=2000, timeout=5)
    assert data_content(data) == b"late"
    producer.close()
    consumer.close()


async def test_publish_and_windowed_fetch_of_a_large_object(daemon: ForwarderDaemon) -> None:
    producer, consumer = attach_endpoint(daemon), attach_endpoint(daemon)
    blob = os.urandom(3_000_000)
    obj = SegmentedObject(from_uri("/big/obj"), blob, freshness=10_000, signer=producer.signer)
    served = await producer.serve(obj.prefix, obj.handler)
    assert obj.last_segment == (len(blob) - 1) // 8000
    got = await consumer.fetch_segments("/big/obj", window=16, timeout=30)
    assert got == blob
    assert obj.served == obj.last_segment + 1  # every segment once: nothing lost, no dupes
    # a second fetch comes from the forwarder's content store
    again = await consumer.fetch_segments("/big/obj", window=16, timeout=30)
    assert again == blob and obj.served == obj.last_segment + 1
    await served.close()
    producer.close()
    consumer.close()


async def test_served_handle_withdraws_once_and_a_refused_serve_restores(
    daemon: ForwarderDaemon, cpu: CpuLoad
) -> None:
    producer, consumer = attach_endpoint(daemon), attach_endpoint(daemon)
    hi = lambda iv, reply: reply(make_data(iv.name, b"hi"))  # noqa: E731
    async with await producer.serve("/h", hi) as served:
        assert served.prefix == from_uri("/h") and served.registered
        assert data_content(await consumer.express("/h/1", timeout=5)) == b"hi"
    assert "/h" not in producer.handlers
    await wait_until(lambda: daemon.fw.fib.get(from_uri("/h")) is None, cpu.budget(2))
    await served.close()  # idempotent
    assert served.prefix not in producer.handlers
    # without a route: close only drops the handler
    local = await producer.serve("/local", hi, register=False)
    assert daemon.fw.fib.get(from_uri("/local")) is None and "/local" in producer.handlers
    await local.close()
    assert "/local" not in producer.handlers
    # a refused registration puts back the handler the prefix had
    long = "/x" * 40
    producer.handlers.add(long, hi)
    with pytest.raises(CommandFailed):
        await producer.serve(long, lambda iv, reply: None)
    assert producer.handlers.get(long) is hi
    # the connection lost while the route is withdrawn raises nothing: it went with the face
    kept = await producer.serve("/kept", hi)
    closing = asyncio.ensure_future(kept.close())
    await asyncio.sleep(0)  # rib/unregister sent, its answer pending
    producer.close()
    await closing
    assert "/kept" not in producer.handlers
    await kept.close()  # and once the endpoint is closed, nothing is sent
    consumer.close()


async def test_verify_hook_rejects_data(daemon: ForwarderDaemon) -> None:
    producer, consumer = attach_endpoint(daemon), attach_endpoint(daemon)
    await producer.serve("/v", lambda iv, reply: reply(make_data(iv.name, b"forged")))

    def refuse(dv: DataView) -> None:
        if data_content(dv) == b"forged":
            raise ValidationError(f"{to_uri(dv.name)}: bad signature")

    with pytest.raises(ValidationError, match="bad signature"):
        await consumer.express("/v/x", timeout=5, verify=refuse)
    assert consumer.counters["verify_failed"] == 1
    ok = await consumer.express("/v/y", timeout=5, verify=lambda dv: None)
    assert data_content(ok) == b"forged"
    producer.close()
    consumer.close()


class FakeForwarder:
    """The far end of an in-memory link, played by the test: records what the app sends."""

    def __init__(self) -> None:
        counters: Counter[str] = Counter()
        self.here, self.app_end = memory_pair(counters)
        self.received: list[bytes] = []
        self.here.bind(self.received.append, lambda: None)


@virtual_time  # lifetimes running out or extended: the endpoint's timers, not the CPU's
async def test_reflexive_interests_extend_the_trigger_and_reach_the_filter() -> None:
    fake = FakeForwarder()
    ep = Endpoint.over_port(fake.app_end)
    rnp = new_rnp()
    answered: list[bytes] = []

    def on_ri(iv: InterestView, reply: object) -> None:
        answered.append(iv.name)
        reply(make_data(iv.name, b"args"))  # type: ignore[operator]

    key = reflexive_key(rnp)
    ep.handlers.add(key, on_ri)
    ti = from_uri("/svc/fn")
    loop = asyncio.get_running_loop()
    sent = loop.time()
    task = asyncio.ensure_future(ep.express(trigger_name(ti, rnp), lifetime_ms=300))
    await wait_until(lambda: fake.received, 2)
    assert parse_interest(fake.received[0]).name == trigger_name(ti, rnp)
    # a Reflexive Interest with a 400 ms lifetime at t=0.15: the TI now waits until 0.75
    await asyncio.sleep(0.15)
    fake.here.send(make_interest(key + from_uri("/args"), lifetime=400))
    await asyncio.sleep(0.25)  # past the TI's own 300 ms lifetime
    assert not task.done()
    assert ep.counters["trigger_extended"] == 1
    assert answered == [key + from_uri("/args")]
    assert any(w[0] == 6 for w in fake.received[1:])  # the filter's Data went out
    # an RI for another RNP extends nothing and finds no handler
    fake.here.send(make_interest(reflexive_key(new_rnp()) + from_uri("/x"), lifetime=4000))
    with pytest.raises(InterestTimeout):
        await asyncio.wait_for(task, 2)
    # at 1.5 times the RI's lifetime after it came, not at the TI's own end nor the other RI's
    assert loop.time() - sent == pytest.approx(0.15 + 1.5 * 0.4, abs=0.01)
    assert ep.counters["trigger_extended"] == 1 and ep.counters["drop_no_handler"] == 1
    ep.handlers.remove(key)
    ep.close()
    with pytest.raises(InterestCanceled):
        await ep.express("/after/close")


@virtual_time  # (the waits below are on its clock: an Interest's dispatch, whatever the CPU)
async def test_handlers_come_and_go_by_longest_prefix() -> None:
    fake = FakeForwarder()
    ep = Endpoint.over_port(fake.app_end)
    got: list[str] = []

    def tag(label: str) -> Callable[[InterestView, object], None]:
        return lambda iv, reply: got.append(label)

    ep.handlers.add("/a", tag("a"))
    ep.handlers.add("/a/b", tag("ab"))
    ep.handlers.add("/x/y", tag("xy"))
    ep.handlers.add("/a/b", tag("ab2"))  # replaces, does not double-count its depth

    async def send(uri: str) -> None:
        # each Interest is dispatched to a handler or dropped for want of one
        seen = len(got) + ep.counters["drop_no_handler"]
        fake.here.send(make_interest(from_uri(uri)))
        await wait_until(lambda: len(got) + ep.counters["drop_no_handler"] > seen, 2)

    await send("/a/b/c")
    await send("/x/y/z")
    ep.handlers.remove("/a/b")
    await send("/a/b/c")  # falls back to the shorter prefix
    await send("/x/y/z")  # depth 2 still served for /x/y
    ep.handlers.remove("/x/y")
    ep.handlers.remove("/x/y")  # idempotent
    await send("/x/y/z")
    ep.handlers.remove("/a")
    await send("/a/b/c")
    assert got == ["ab2", "xy", "a", "xy"]
    assert ep.counters["drop_no_handler"] == 2
    ep.close()
