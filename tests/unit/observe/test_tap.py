"""The compiled capture taps (forwarder/observe/_tap.c): the block each appends is the one the
pcapng module writes and reads, the buffer is bounded, the callback comes once per fill, and
a tap hands each packet on unchanged."""

from __future__ import annotations

import gc
import struct
import time
import weakref
from collections import Counter
from pathlib import Path

import pytest

from forwarder.observe._tap import Sink, Tap
from forwarder.observe.capture import PacketCapture
from icn.wire.pcapng import enhanced_packet, interface_description, read_capture, section_header


def _nothing() -> None:
    """A sink's callback that leaves its blocks where they are."""


@pytest.mark.parametrize("size", range(9))  # every padding, twice, and the empty packet
@pytest.mark.parametrize("inbound", [True, False])
def test_a_block_is_the_pcapng_modules_block_with_a_nanosecond_time(
    size: int, inbound: bool
) -> None:
    packet = bytes(range(7, 7 + size))
    sink = Sink(1 << 20, 1 << 21, _nothing)
    before = time.time_ns()
    assert sink.append(packet, 3, 1 if inbound else 2)
    after = time.time_ns()
    block, count = sink.take()
    assert count == 1 and sink.size == 0 and sink.packets == 0
    reference = enhanced_packet(3, 0, inbound, packet)
    # the same bytes but the time (offsets 12-19: high and low words)
    assert len(block) == len(reference)
    assert block[:12] == reference[:12] and block[20:] == reference[20:]
    high, low = struct.unpack_from("<II", block, 12)
    assert before <= (high << 32 | low) <= after
    # and the reader gets the packet, its interface and direction back
    ifaces = b"".join(interface_description(f"if{i}", "", nanoseconds=True) for i in range(4))
    (got,) = read_capture(section_header() + ifaces + block)
    assert got.ndn == packet and got.interface.name == "if3" and got.inbound is inbound


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_tap_records_then_hands_on_the_same_object(kind: type) -> None:
    wire = kind(b"\x06\x03abc")
    seen: list[object] = []
    sink = Sink(1 << 20, 1 << 21, _nothing)
    tap = sink.tap(0, False, seen.append)
    tap(wire)
    assert seen == [wire] and seen[0] is wire and tap.target == seen.append
    (got,) = read_capture(
        section_header() + interface_description("x", "", nanoseconds=True) + sink.take()[0]
    )
    assert got.ndn == b"\x06\x03abc" and got.inbound is False


def test_the_buffer_is_bounded_and_what_does_not_fit_is_counted() -> None:
    block = len(enhanced_packet(0, 0, True, bytes(10)))  # 56 bytes
    sink = Sink(block * 100, block * 3, _nothing)
    tap = sink.tap(0, True, lambda _w: None)
    for _ in range(5):
        tap(bytes(10))
    assert (sink.packets, sink.dropped, sink.size) == (3, 2, 3 * block)
    assert sink.take()[1] == 3
    tap(bytes(10))  # room again
    assert (sink.packets, sink.dropped) == (1, 2)


def test_the_callback_comes_when_full_and_is_not_reentered() -> None:
    block = len(enhanced_packet(0, 0, True, bytes(10)))
    calls: list[int] = []
    taps: list[Tap] = []

    def on_full() -> None:
        calls.append(sink.packets)
        taps[0](bytes(10))  # a packet while flushing: buffered, no second callback
        sink.take()

    sink = Sink(block * 2, block * 10, on_full)
    taps.append(sink.tap(0, True, lambda _w: None))
    taps[0](bytes(10))
    assert calls == []
    taps[0](bytes(10))
    assert calls == [2] and sink.packets == 0


def test_errors_reach_the_caller() -> None:
    def boom() -> None:
        raise RuntimeError("flush failed")

    tap = Sink(1, 1000, boom).tap(0, True, lambda _w: None)
    with pytest.raises(RuntimeError, match="flush failed"):
        tap(b"x")
    tap = Sink(1 << 20, 1 << 21, _nothing).tap(0, True, lambda _w: None)
    with pytest.raises(TypeError, match="one argument"):
        tap(b"x", b"y")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        tap(42)  # type: ignore[arg-type]  # no buffer
    with pytest.raises(ValueError, match="positive"):
        Sink(0, 5, _nothing)


def test_a_capture_and_its_sink_are_collected() -> None:
    class Owner:
        def __init__(self) -> None:
            self.sink = Sink(1 << 20, 1 << 21, self.flush)
            self.tap = self.sink.tap(0, True, self.flush_wire)

        def flush(self) -> None:
            """The owner's flush: the cycle owner -> sink -> bound method -> owner."""

        def flush_wire(self, _wire: bytes) -> None:
            """The owner's face callback: the cycle owner -> tap -> bound method -> owner."""

    owner = Owner()
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None


def test_packets_the_buffer_cannot_hold_count_as_not_written(tmp_path: Path) -> None:
    counters: Counter[str] = Counter()
    cap = PacketCapture(str(tmp_path / "c.pcapng"), 1 << 20, 1, counters)
    block = len(enhanced_packet(0, 0, True, bytes(10)))
    cap._sink = Sink(1 << 20, 2 * block, cap.flush)  # a loop that could not flush in time

    class Face:
        face_id, local_uri, remote_uri = 1, "udp4://127.0.0.1:6363", "udp4://10.0.0.2:6363"

    received, _ = cap.tap(Face(), lambda _w: None, lambda _w: None)  # type: ignore[arg-type]
    for _ in range(5):
        received(bytes(10))
    cap.close()
    assert counters["capture.packets"] == 5 and counters["capture.not_written"] == 3
    assert len(list(read_capture((tmp_path / "c.pcapng").read_bytes()))) == 2
