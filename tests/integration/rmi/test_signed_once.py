"""A result too large for one answer is signed once: the server publishes it with a manifest of
its segments' digests, signed by its key, and a client that checks the server's key verifies
that one signature and each segment's digest against it (it used to verify an Ed25519
signature per segment).  A forged segment is refused."""

from __future__ import annotations

import os

import pytest

from apps.inproc import attach_endpoint
from compute.rmi import RmiError
from forwarder.face.memory import MemoryTransport
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.publish import signed_once
from icn.dataplane.segments import fetch_segments, fetch_signed
from icn.errors import ValidationError
from icn.security.keys import Identity, verify_data
from icn.security.manifest import manifest_name
from icn.wire import tlv_types as T
from icn.wire.lp import parse_lp
from icn.wire.name import from_uri, segment
from icn.wire.packet import DataView, parse_data
from tests.integration.rmi.conftest import Line

SIZE = 5 << 20  # over the largest local packet: fetched as segments even on a local path


async def test_a_large_result_is_checked_by_one_signature(line: Line) -> None:
    server = await line.start_server()
    client = line.client(server_key=server.identity.public_bytes)
    checked: list[bytes] = []
    verify = client.verify
    assert verify is not None

    def counting(dv: DataView) -> None:
        checked.append(dv.name)
        verify(dv)

    client.verify = counting
    out = await client.call("/svc/big_result", SIZE)
    assert out == bytes(range(256)) * (SIZE // 256)
    stored = [obj for _, obj, _ in server._results._items.values()]
    assert any(obj.manifested for obj in stored), "the result was not published with a manifest"
    # the answer, the manifest's one segment and any poll: not one check per segment (656)
    assert 0 < len(checked) < 10, len(checked)


async def test_a_segment_that_does_not_match_the_manifest_is_refused(
    line: Line, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await line.start_server()
    client = line.client(server_key=server.identity.public_bytes, retries=0)
    # the network flips a byte of every segment 3 of any object on its way to an application
    # (at the link into its endpoint: the endpoint itself is compiled, its methods fixed)
    original = MemoryTransport._deliver

    def tamper(self: MemoryTransport, wire: bytes) -> None:
        if isinstance(getattr(self._receive, "__self__", None), Endpoint):
            packet = parse_lp(wire).fragment or b"" if wire[0] == T.LP_PACKET else wire
            if packet[:1] == b"\x06":
                dv = parse_data(packet)
                if dv.name.endswith(segment(3)) and dv.content_end > dv.content_start:
                    flipped = bytearray(wire)
                    flipped[wire.index(packet) + dv.content_start] ^= 0xFF
                    wire = bytes(flipped)
        original(self, wire)

    monkeypatch.setattr(MemoryTransport, "_deliver", tamper)
    with pytest.raises((ValidationError, RmiError)):
        await client.call("/svc/big_result", SIZE)


async def test_a_cached_manifest_does_not_pass_for_the_object(line: Line) -> None:
    """A consumer's CanBePrefix Interest for the object may meet the manifest's first segment in
    a content store (named under the object); fetch_signed still returns the object."""
    identity = Identity.generate()
    producer = attach_endpoint(line.daemons[-1])
    content = os.urandom(50_000)
    obj = signed_once(from_uri("/svc/obj"), content, signer=identity.signer(), freshness=60_000)
    assert obj.manifested
    await producer.serve(obj.prefix, obj.handler)
    try:
        key = identity.public_bytes
        first = attach_endpoint(line.daemons[0])
        # someone fetched the manifest: it now sits in the forwarders' content stores
        await fetch_segments(first, manifest_name(obj.prefix), must_be_fresh=False)
        second = attach_endpoint(line.daemons[0])
        got = await fetch_signed(
            second, obj.prefix, lambda dv: verify_data(dv, key), must_be_fresh=False
        )
        assert got == content
    finally:
        producer.close()
