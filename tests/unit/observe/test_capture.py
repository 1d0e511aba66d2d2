"""The capture file: pcapng blocks read back, rotation at the size cap, write errors counted,
and ``icn pcap``'s line for each kind of link packet."""

from __future__ import annotations

import os
import struct
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from apps.cli.pcap import describe
from forwarder.observe.capture import PacketCapture
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.fragment import Fragmenter
from icn.wire.lp import encode_lp
from icn.wire.name import from_uri
from icn.wire.pcapng import (
    LINKTYPE_PPP,
    enhanced_packet,
    interface_description,
    read_capture,
    section_header,
)


def _ignore(_wire: bytes) -> None:
    """What the face would do with the packet next: nothing, here."""


class FakeFace:
    def __init__(self, face_id: int, remote: str) -> None:
        self.face_id = face_id
        self.link = self  # the capture reads the id where Face keeps it: face.link.face_id
        self.remote_uri = remote
        self.local_uri = "udp4://127.0.0.1:6363"


def interest(name: str, nonce: int = 1) -> bytes:
    return make_interest(from_uri(name), nonce=nonce.to_bytes(4, "big"))


def read(path: Path) -> list[Any]:
    return list(read_capture(path.read_bytes()))


def test_blocks_read_back_with_faces_directions_and_times() -> None:
    data = (
        section_header()
        + interface_description("udp4://10.0.0.2:6363", "face 257 local=x")
        + enhanced_packet(0, 1_700_000_000_123_456, True, b"\x05\x01\x00")
        + enhanced_packet(0, 1_700_000_000_223_456, False, b"\x06\x02\x00\x00")
    )
    pkts = list(read_capture(data))
    assert [p.inbound for p in pkts] == [True, False]
    assert pkts[0].interface.name == "udp4://10.0.0.2:6363"
    assert pkts[0].interface.linktype == LINKTYPE_PPP
    assert pkts[0].time == pytest.approx(1_700_000_000.123456)
    assert [p.ndn for p in pkts] == [b"\x05\x01\x00", b"\x06\x02\x00\x00"]


def test_classic_pcap_with_ppp_is_read() -> None:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_PPP)
    frame = b"\x00\x77" + interest("/a")
    record = struct.pack("<IIII", 5, 250_000, len(frame), len(frame)) + frame
    (pkt,) = read_capture(header + record)
    assert pkt.time == 5.25 and pkt.inbound is None
    assert describe(pkt).name == "/a"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"hello world, not a capture", "not a pcapng"),
        (section_header()[:-6], "truncated"),
        (section_header() + enhanced_packet(3, 0, True, b"\x05\x00"), "interface 3"),
    ],
)
def test_bad_files_are_named_errors(data: bytes, words: str) -> None:
    with pytest.raises(DecodeError, match=words):
        list(read_capture(data))


def test_capture_writes_an_interface_per_face_and_both_directions(tmp_path: Path) -> None:
    counters: Counter[str] = Counter()
    cap = PacketCapture(str(tmp_path / "c.pcapng"), 1 << 20, 2, counters)
    a, b = FakeFace(257, "udp4://10.0.0.2:6363"), FakeFace(258, "unix:///tmp/app.sock")
    a_in, _a_out = cap.tap(a, _ignore, _ignore)  # type: ignore[arg-type]
    b_in, b_out = cap.tap(b, _ignore, _ignore)  # type: ignore[arg-type]
    a_in(interest("/x"))
    b_out(interest("/x"))
    b_in(make_data(from_uri("/x"), b"hi"))
    cap.close()  # writes what is left and closes the file
    pkts = read(tmp_path / "c.pcapng")
    assert [(p.interface.name, p.inbound) for p in pkts] == [
        ("udp4://10.0.0.2:6363", True),
        ("unix:///tmp/app.sock", False),
        ("unix:///tmp/app.sock", True),
    ]
    assert [describe(p).type for p in pkts] == ["INTEREST", "INTEREST", "DATA"]
    assert counters["capture.packets"] == 3 and counters["capture.not_written"] == 0
    assert counters["capture.bytes"] > 0
    a_in(interest("/late"))
    cap.flush()
    assert counters["capture.not_written"] == 1


def data(i: int, size: int = 1000) -> bytes:
    return make_data(from_uri(f"/r/{i}"), b"x" * size)


def test_rotation_keeps_every_packet_and_at_most_files_files(tmp_path: Path) -> None:
    path = tmp_path / "c.pcapng"
    counters: Counter[str] = Counter()
    cap = PacketCapture(str(path), 64 * 1024, 3, counters)
    received, sent = cap.tap(FakeFace(257, "udp4://10.0.0.2:6363"), _ignore, _ignore)  # type: ignore[arg-type]
    for i in range(300):  # ~320 KB: five files' worth, three kept
        (received if i % 2 == 0 else sent)(data(i))
        if i % 10 == 9:
            cap.flush()
    cap.close()
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["c.pcapng", "c.pcapng.1", "c.pcapng.2"]
    assert all(f.stat().st_size <= 64 * 1024 for f in files)
    assert counters["capture.rotations"] >= 4 and counters["capture.not_written"] == 0
    assert counters["capture.packets"] == 300
    names = [describe(p).name for f in reversed(files) for p in read(f)]
    # the kept files hold the newest packets, in order, none missing between them
    first = int(names[0].rsplit("/", 1)[1])
    assert names == [f"/r/{i}" for i in range(first, 300)]
    assert all(p.interface.name == "udp4://10.0.0.2:6363" for p in read(files[1]))


def test_a_failed_write_counts_the_packets_and_the_capture_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    counters: Counter[str] = Counter()
    cap = PacketCapture(str(tmp_path / "c.pcapng"), 1 << 20, 1, counters)
    received, _ = cap.tap(FakeFace(257, "udp4://10.0.0.2:6363"), _ignore, _ignore)  # type: ignore[arg-type]
    received(data(0))
    received(data(1))
    cap.close()
    assert counters["capture.not_written"] == 0 and len(read(tmp_path / "c.pcapng")) == 2

    cap = PacketCapture(str(tmp_path / "d.pcapng"), 1 << 20, 1, counters := Counter())
    received, _ = cap.tap(FakeFace(257, "udp4://10.0.0.2:6363"), _ignore, _ignore)  # type: ignore[arg-type]
    writer = cap.file
    assert writer.fd is not None
    os.close(writer.fd)  # the disk went away under us
    writer.fd = os.open("/dev/full", os.O_WRONLY)
    for i in range(3):
        received(data(i))
        cap.flush()  # a write each: three failures
    cap.close()  # ENOSPC: counted, logged once, nothing raised
    assert counters["capture.not_written"] == 3 and counters["capture.packets"] == 3
    assert len([r for r in caplog.records if "capture" in r.getMessage()]) == 1


def test_the_tap_records_then_forwards_each_packet(tmp_path: Path) -> None:
    cap = PacketCapture(str(tmp_path / "c.pcapng"), 1 << 20, 1, Counter())
    got: list[tuple[str, bytes]] = []
    received, sent = cap.tap(
        FakeFace(257, "udp4://10.0.0.2:6363"),  # type: ignore[arg-type]
        lambda w: got.append(("in", w)),
        lambda w: got.append(("out", w)),
    )
    received(data(0))
    sent(data(1))
    cap.close()
    assert got == [("in", data(0)), ("out", data(1))]
    pkts = read(tmp_path / "c.pcapng")
    assert [describe(p).name for p in pkts] == ["/r/0", "/r/1"]
    # nanosecond stamps, read back as seconds since the epoch
    assert abs(pkts[0].time - time.time()) < 60


def test_pcap_lines_for_nack_and_fragments() -> None:
    face = FakeFace(257, "udp4://10.0.0.2:6363")
    wire = interest("/n/1")
    nack = encode_lp(wire, nack_reason=T.NACK_NO_ROUTE)
    big = make_data(from_uri("/big/file"), b"z" * 3000)
    fragments = Fragmenter(1400).fragment(big)
    data = section_header() + interface_description(face.remote_uri, "face 257 local=x")
    data += enhanced_packet(0, 0, False, nack)
    for frag in fragments:
        data += enhanced_packet(0, 0, True, frag)
    lines = [describe(p) for p in read_capture(data)]
    assert (lines[0].type, lines[0].nack_reason, lines[0].name) == ("NACK", "NoRoute", "/n/1")
    assert lines[0].text().endswith("257 udp4://10.0.0.2:6363 out NACK NoRoute /n/1, size 29")
    n = len(fragments)
    assert n > 1
    assert [ln.fragment for ln in lines[1:]] == [f"{i}/{n}" for i in range(1, n + 1)]
    assert lines[1].name == "/big/file" and lines[2].name == ""
