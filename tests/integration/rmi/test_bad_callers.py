"""Callers that lie: forged, replayed or garbage credentials, swapped arguments, junk names.
The server refuses each with a clear error (or drops junk), never runs the function, and
keeps serving."""

from __future__ import annotations

import pytest

from apps.inproc import attach_endpoint
from compute.rmi import BadArguments, Unauthorized
from compute.rmi.credential import build_credential
from compute.rmi.wire import open_envelope, pack_args
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import data_content
from icn.security.keys import Identity
from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri
from icn.wire.packet import InterestView
from icn.wire.reflexive import new_rnp, reflexive_key, trigger_name
from tests.integration.rmi import funcs
from tests.integration.rmi.conftest import Line


async def call_with(ep: Endpoint, function: str, answer: object) -> dict[str, object]:
    """One exchange where the test answers the server's Reflexive Interests itself."""
    rnp = new_rnp()
    key = reflexive_key(rnp)

    def handler(iv: InterestView, reply: object) -> None:
        wire = answer(iv, key)  # type: ignore[operator]
        if wire:
            reply(wire)  # type: ignore[operator]

    ep.handlers.add(key, handler)
    try:
        td = await ep.express(
            trigger_name(from_uri(f"/svc/{function}"), rnp), lifetime_ms=2000, timeout=10
        )
    finally:
        ep.handlers.remove(key)
    return open_envelope(data_content(td))  # raises the typed error


def credential(
    iv: InterestView, key: bytes, *, rnp_key: bytes | None = None, **kw: object
) -> bytes:
    blob = pack_args((21,), {})
    fields: dict[str, object] = dict(
        function="echo",
        rnp_key=rnp_key or key,
        ephemeral=b"\x00" * 32,
        private=False,
        size=len(blob),
        payload=blob,
        inline=True,
    )
    fields.update(kw)
    return build_credential(Identity.generate(), iv.name, **fields)  # type: ignore[arg-type]


async def test_garbage_forged_and_replayed_credentials(line: Line) -> None:
    server = await line.start_server()
    ep = attach_endpoint(line.daemons[0])
    try:
        with pytest.raises(Unauthorized, match="credential rejected"):
            await call_with(ep, "echo", lambda iv, key: make_data(iv.name, b"\x93garbage"))

        def forged(iv: InterestView, key: bytes) -> bytes:
            wire = bytearray(credential(iv, key))
            wire[-5] ^= 0xFF  # break the Ed25519 signature
            return bytes(wire)

        with pytest.raises(Unauthorized, match="credential rejected"):
            await call_with(ep, "echo", forged)
        other_call = reflexive_key(new_rnp())
        with pytest.raises(Unauthorized, match="another call"):
            await call_with(ep, "echo", lambda iv, key: credential(iv, key, rnp_key=other_call))
        with pytest.raises(Unauthorized, match="another call"):
            await call_with(ep, "echo", lambda iv, key: credential(iv, key, function="add"))
        assert funcs.RAN["echo"] == 0 and server.counters["started"] == 0
    finally:
        ep.close()


async def test_arguments_that_do_not_match_the_signed_credential(line: Line) -> None:
    server = await line.start_server()
    ep = attach_endpoint(line.daemons[0])
    blob = pack_args((b"x" * 20_000,), {})  # segmented: pulled after the credential

    def answer(iv: InterestView, key: bytes) -> bytes:
        if iv.name.startswith(key + from_uri("/hello")):
            return credential(
                iv, key, function="digest", size=len(blob), payload=blob, inline=False
            )
        # the segments the server pulls carry other bytes than the ones signed for
        swapped = SegmentedObject(key + from_uri("/args"), blob[:-1] + b"y")
        return swapped.answer(iv) or b""

    try:
        with pytest.raises(BadArguments, match="do not match"):
            await call_with(ep, "digest", answer)
        assert funcs.RAN["digest"] == 0 and server.counters["started"] == 0
    finally:
        ep.close()


async def test_junk_names_are_dropped_and_the_server_keeps_serving(line: Line) -> None:
    server = await line.start_server()
    ep = attach_endpoint(line.daemons[0])
    try:
        for uri in ("/svc", "/svc/a/b/c", "/svc/_thunk", "/svc/echo/_memo"):
            ep._write(make_interest(from_uri(uri), lifetime=100))
        ep._write(make_interest(from_uri("/svc/_thunk/0000"), lifetime=100))
        client = line.client()
        assert await client.call("/svc/echo", "still here") == "still here"
        assert server.counters["drop_bad_name"] >= 3
    finally:
        ep.close()


async def test_bad_call_key_and_oversized_arguments_get_clear_errors(line: Line) -> None:
    server = await line.start_server()
    ep = attach_endpoint(line.daemons[0])
    try:
        # a private call whose ephemeral key is not an X25519 key
        with pytest.raises(BadArguments, match="unusable call key"):
            await call_with(
                ep, "echo", lambda iv, key: credential(iv, key, private=True, ephemeral=b"\x01")
            )
        blob = pack_args((b"x" * 20_000,), {})

        def answer(iv: InterestView, key: bytes) -> bytes:
            if iv.name.startswith(key + from_uri("/hello")):
                # signed for fewer bytes than the segments then carry
                return credential(
                    iv, key, function="digest", size=100, payload=blob[:100], inline=False
                )
            return SegmentedObject(key + from_uri("/args"), blob).answer(iv) or b""

        with pytest.raises(BadArguments, match="unreadable arguments"):
            await call_with(ep, "digest", answer)
        assert funcs.RAN["echo"] == funcs.RAN["digest"] == 0
        assert server.counters["started"] == 0 and server.counters["internal_error"] == 0
    finally:
        ep.close()
