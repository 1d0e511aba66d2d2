"""link/shape and link/list (an icn extension) through the real pipelines, in one process.

Apps sit on memory faces of a socketless daemon (the App helper of test_management); commands
reach the management face through the FIB, PIT and scope rules like any other.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from forwarder.daemon import ForwarderDaemon
from forwarder.face.face import Face
from forwarder.face.shaper import ShaperConfig
from forwarder.mgmt.control import ControlError, decode_params
from forwarder.mgmt.link_module import parse_settings
from icn.dataplane.mgmt_client import parse_link_list
from icn.dataplane.mgmt_ext import LINK_SHAPE, LinkShapeCommandParameters, encode_link_shape
from icn.security.signed_interest import make_signed_interest
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri, generic
from icn.wire.tlv import encode_nni_tlv, encode_tlv
from tests.unit.mgmt.test_management import App
from tests.waiting import wait_until

SHAPE = from_uri("/localhost/nfd/link/shape")


def _shape_name(face_id: int, settings: dict[str, Any], prefix: bytes = SHAPE) -> bytes:
    return prefix + generic(encode_link_shape(face_id, settings))


async def _shape(app: App, face_id: int, **settings: Any) -> dict[str, Any]:
    app.send(make_signed_interest(_shape_name(face_id, settings), lifetime=1000))
    return await app.response()


async def _raw_shape(app: App, face_id: int, raw: bytes) -> dict[str, Any]:
    """A LinkShape element holding ``raw`` instead of encoded settings."""
    cp = encode_tlv(0x68, encode_nni_tlv(0x69, face_id) + encode_tlv(LINK_SHAPE, raw))
    app.send(make_signed_interest(SHAPE + generic(cp), lifetime=1000))
    return await app.response()


def _face(daemon: ForwarderDaemon, face_id: int) -> Face:
    face = daemon.faces.get(face_id)
    assert face is not None
    return face


async def _link_list(app: App) -> list[dict[str, Any]]:
    return parse_link_list(await app.dataset("link", "list"))


async def test_shape_sets_the_face_shaper_and_zeros_remove_it(daemon: ForwarderDaemon) -> None:
    app, peer = App(daemon), App(daemon)
    resp = await _shape(
        app, peer.face_id, delay_ms=10, jitter_ms=2.5, loss=0.05, rate_mbps=10, seed=7
    )
    assert resp["status_code"] == 200 and resp["face_id"] == peer.face_id
    shaper = _face(daemon, peer.face_id).shaper
    assert shaper is not None
    cfg = shaper.config
    assert (cfg.delay, cfg.jitter, cfg.loss, cfg.rate, cfg.seed) == (0.01, 0.0025, 0.05, 1e7, 7)
    assert cfg.max_pending == 1000  # the config file's default queue_packets
    assert daemon.counters["mgmt.link_shape"] == 1
    assert await _link_list(app) == [
        {
            "face_id": peer.face_id,
            "delay_ms": 10.0,
            "jitter_ms": 2.5,
            "loss": 0.05,
            "rate_mbps": 10.0,
            "dropped": 0,
        }
    ]

    # a second command replaces the shaper; all zero (fields absent or 0) removes it
    assert (await _shape(app, peer.face_id, loss=0.5))["status_code"] == 200
    shaper = _face(daemon, peer.face_id).shaper
    assert shaper is not None and shaper.config == ShaperConfig(loss=0.5, max_pending=1000)
    resp = await _shape(app, peer.face_id, delay_ms=0, loss=0.0, seed=3)
    assert resp["status_code"] == 200
    assert _face(daemon, peer.face_id).shaper is None
    assert await _link_list(app) == []
    assert daemon.counters["mgmt.link_shape"] == 3


async def test_loss_one_cuts_the_link_and_zero_restores_it(daemon: ForwarderDaemon) -> None:
    consumer, producer = App(daemon), App(daemon)
    assert (await producer.command("rib", "register", name="/p"))["status_code"] == 200

    assert (await _shape(consumer, producer.face_id, loss=1.0))["status_code"] == 200
    consumer.send(make_interest(from_uri("/p/cut")))
    face = daemon.faces.get(producer.face_id)
    assert face is not None
    await wait_until(lambda: face.transport.counters["shaper.loss"] >= 1, 2)
    assert producer.received == []
    (row,) = await _link_list(consumer)
    assert row["face_id"] == producer.face_id and row["loss"] == 1.0 and row["dropped"] == 1

    assert (await _shape(consumer, producer.face_id))["status_code"] == 200
    # restored: unshaped, but the cut's drop stays counted for whoever samples after it
    (row,) = await _link_list(consumer)
    assert row["face_id"] == producer.face_id and row["loss"] == 0.0 and row["dropped"] == 1
    assert face.shaper is None and face.shaper_dropped == 1
    consumer.send(make_interest(from_uri("/p/back")))
    got = await producer.next_packet()
    assert got[0] == T.INTEREST and b"back" in got
    producer.send(make_data(from_uri("/p/back"), b"ok"))
    assert (await consumer.next_packet())[0] == T.DATA


async def test_face_id_zero_shapes_the_requesting_face(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    resp = await _shape(app, 0, delay_ms=5)  # the answer itself goes through the new shaper
    assert resp["status_code"] == 200 and resp["face_id"] == app.face_id
    shaper = _face(daemon, app.face_id).shaper
    assert shaper is not None and shaper.config.delay == 0.005


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"loss": 1.5}, "LinkShape.loss"),
        ({"delay_ms": -1}, "LinkShape.delay_ms"),
        ({"jitter_ms": -0.5}, "LinkShape.jitter_ms"),
        ({"rate_mbps": 0}, "LinkShape.rate_mbps"),
        ({"rate_mbps": -3}, "LinkShape.rate_mbps"),
        ({"delay_ms": "10ms"}, "LinkShape.delay_ms"),
        ({"seed": 1.5}, "LinkShape.seed"),
        ({"delay_ms": float("inf")}, "LinkShape.delay_ms"),
        ({"dealy_ms": 10}, "LinkShape.dealy_ms: unknown field"),
    ],
)
async def test_bad_values_get_400_naming_the_field(
    daemon: ForwarderDaemon, settings: dict[str, Any], field: str
) -> None:
    app, peer = App(daemon), App(daemon)
    resp = await _shape(app, peer.face_id, **settings)
    assert resp["status_code"] == 400 and field in resp["status_text"], resp["status_text"]
    assert _face(daemon, peer.face_id).shaper is None
    assert daemon.counters["mgmt.link_shape"] == 0


async def test_malformed_missing_and_refused(daemon: ForwarderDaemon) -> None:
    app, peer = App(daemon), App(daemon)
    bad_json = await _raw_shape(app, peer.face_id, b"{not json")
    assert bad_json["status_code"] == 400 and "LinkShape is not JSON" in bad_json["status_text"]
    not_object = await _raw_shape(app, peer.face_id, b"[0.5]")
    assert not_object["status_code"] == 400 and "JSON object" in not_object["status_text"]
    # NFD's ControlParameters alone: no LinkShape element, no FaceId
    no_shape = await app.command("link", "shape", face_id=peer.face_id)
    assert no_shape["status_code"] == 400 and "LinkShape" in no_shape["status_text"]
    assert (await app.command("link", "shape"))["status_code"] == 400

    unknown = await _shape(app, 9999, loss=0.1)
    assert unknown["status_code"] == 404 and "face 9999" in unknown["status_text"]
    mgmt = await _shape(app, 1, loss=0.1)
    assert mgmt["status_code"] == 400 and "management face" in mgmt["status_text"]
    assert daemon.counters["mgmt.link_shape"] == 0


async def test_localhop_unsigned_and_replayed_commands_are_refused(
    daemon: ForwarderDaemon,
) -> None:
    app, peer = App(daemon), App(daemon)
    localhop = _shape_name(peer.face_id, {"loss": 1.0}, from_uri("/localhop/nfd/link/shape"))
    app.send(make_signed_interest(localhop, lifetime=1000))
    assert (await app.response())["status_code"] == 501

    unsigned = _shape_name(peer.face_id, {"loss": 1.0})
    app.send(make_interest(unsigned, lifetime=1000))
    assert (await app.response())["status_code"] == 403

    name = _shape_name(peer.face_id, {"delay_ms": 1})
    app.send(make_signed_interest(name, sig_nonce=b"link-nonce", lifetime=1000))
    assert (await app.response())["status_code"] == 200
    assert (await _shape(app, peer.face_id))["status_code"] == 200  # unshaped again
    app.send(make_signed_interest(name, sig_nonce=b"link-nonce", lifetime=1000))
    assert (await app.response())["status_code"] == 403
    assert _face(daemon, peer.face_id).shaper is None


async def test_other_commands_ignore_a_link_shape_element(daemon: ForwarderDaemon) -> None:
    """Non-critical (even type): NFD's commands, decoded by python-ndn's model, skip it."""
    app = App(daemon)
    cp = encode_link_shape(app.face_id, {"loss": 1})
    assert decode_params(cp).face_id == app.face_id
    ours = decode_params(cp, LinkShapeCommandParameters)
    assert ours.face_id == app.face_id and json.loads(bytes(ours.link_shape)) == {"loss": 1}
    # faces/update with the element: answered as without it, and nothing is shaped
    app.send(make_signed_interest(from_uri("/localhost/nfd/faces/update") + generic(cp)))
    resp = await app.response()
    assert resp["status_code"] == 200 and resp["face_id"] == app.face_id
    assert _face(daemon, app.face_id).shaper is None


def test_link_shape_after_face_id_only() -> None:
    """The extension model reads fields in order: LinkShape before FaceId is malformed."""
    cp = encode_tlv(0x68, encode_tlv(LINK_SHAPE, b"{}") + encode_tlv(0x69, b"\x05"))
    with pytest.raises(ControlError) as exc:
        decode_params(cp, LinkShapeCommandParameters)
    assert exc.value.status == 400
    assert parse_settings(b"{}").face_shaper() is None
