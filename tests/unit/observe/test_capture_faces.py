"""A capture attached to a face table: every face it has and gets later is tapped at link level
(fragments as fragments, both directions, Nacks), an interface per face, and a table without a
capture leaves its faces' paths untouched."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from apps.cli.pcap import describe
from forwarder.face.face import Face
from forwarder.face.face_table import FaceTable
from forwarder.face.memory import memory_pair
from forwarder.observe.capture import PacketCapture
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri
from icn.wire.pcapng import read_capture
from tests.unit.face.helpers import ManualSoon, RecordingSink


def test_faces_before_and_after_attach_are_captured_at_link_level(tmp_path: Path) -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    table = FaceTable(counters, sink=RecordingSink())
    peer_sink = RecordingSink()
    near1, far1 = memory_pair(counters, name="one", mtu=600, call_soon=soon)
    near2, far2 = memory_pair(counters, name="two", call_soon=soon)
    face1 = Face(near1)
    table.add(face1)
    # no capture yet: link packets go straight to the transport, nothing wraps them
    assert face1.link.output == near1.send
    peer1, peer2 = Face(far1), Face(far2)
    peer1.sink = peer2.sink = peer_sink

    cap = PacketCapture(str(tmp_path / "c.pcapng"), 1 << 20, 1, counters)
    cap.attach(table)  # face1 is tapped now, face2 when it joins
    face2 = Face(near2)
    table.add(face2)

    interest = make_interest(from_uri("/cap/x"), nonce=b"\0\0\0\1")
    peer1.send_interest(interest)
    soon.run()  # in on face 1 (delivery is deferred)
    face1.send_data(make_data(from_uri("/cap/x"), b"d" * 1500))  # out on face 1, fragmented
    face2.send_nack(interest, T.NACK_NO_ROUTE)  # out on face 2
    soon.run()
    assert len(peer_sink.data) == 1 and len(peer_sink.nacks) == 1
    cap.close()

    pkts = list(read_capture((tmp_path / "c.pcapng").read_bytes()))
    lines = [describe(p) for p in pkts]
    shown = [(ln.face.split()[0], ln.direction, ln.type, ln.fragment, ln.name) for ln in lines]
    n = sum(1 for s in shown if s[2] == "FRAGMENT")
    assert n >= 3  # 1.5 KB over a 600-byte MTU
    assert shown == [
        (str(face1.face_id), "in", "INTEREST", None, "/cap/x"),
        *[
            (str(face1.face_id), "out", "FRAGMENT", f"{i}/{n}", "/cap/x" if i == 1 else "")
            for i in range(1, n + 1)
        ],
        (str(face2.face_id), "out", "NACK", None, "/cap/x"),
    ]
    assert lines[-1].nack_reason == "NoRoute"
    assert {p.interface.name for p in pkts} == {face1.remote_uri, face2.remote_uri}
    assert pkts[-1].interface.description == f"face {face2.face_id} local={face2.local_uri}"
    # what the capture wrote is byte for byte what the transports carried
    assert pkts[0].ndn == interest
    assert counters["capture.packets"] == len(pkts) and counters["capture.not_written"] == 0


def test_a_face_table_without_capture_sets_no_tap() -> None:
    counters: Counter[str] = Counter()
    table = FaceTable(counters)
    near, _far = memory_pair(counters, call_soon=ManualSoon())
    face = Face(near)
    table.add(face)
    assert table.tap is None and face.link.output == near.send
    face.set_tap(lambda f, receive, send: (receive, lambda w: send(w)))
    assert face.link.output != near.send
    face.set_tap(None)  # a capture that stops gives the face its direct path back
    assert face.link.output == near.send
