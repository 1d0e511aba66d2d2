"""Congestion marking on a face's send path (NFD's GenericLinkService::checkCongestionLevel):
a fake transport whose send queue the test sets, and virtual time."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace
from typing import Any, cast

import pytest

from forwarder.face.face import Face
from forwarder.face.link_service import DEFAULT_CONGESTION_THRESHOLD, LinkService
from forwarder.face.memory import memory_pair
from forwarder.face.transport import Transport
from forwarder.face.udp import UdpTransport, _UdpSocket
from icn.errors import ConfigError
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.lp import parse_lp
from icn.wire.name import from_uri
from tests.unit.face.helpers import FakeClock, ManualSoon, RecordingSink

INTEREST = make_interest(from_uri("/c/i"), nonce=b"\x01\x02\x03\x04", lifetime=1000)
DATA = make_data(from_uri("/c/d"), b"x" * 100, freshness=1000)
INTERVAL = 0.1


class QueueTransport(Transport):
    """Records what is sent; its send queue holds whatever ``queued`` says."""

    def __init__(self, counters: Counter[str], capacity: int = -1) -> None:
        super().__init__(
            local_uri="fake://local", remote_uri="fake://remote", is_local=True, counters=counters
        )
        self.queued = 0
        self.capacity = capacity
        self.sent: list[bytes] = []

    @property
    def send_queue_capacity(self) -> int:
        return self.capacity

    def send_queue_length(self) -> int:
        return self.queued

    def send(self, wire: bytes) -> None:
        self.sent.append(wire)

    def _close_io(self) -> None:
        pass


class Rig:
    def __init__(self, capacity: int = -1, **face_options: Any) -> None:
        self.counters: Counter[str] = Counter()
        self.clock = FakeClock()
        self.transport = QueueTransport(self.counters, capacity)
        self.face = Face(self.transport, clock=self.clock.time, **face_options)

    def data_mark(self, queued: int | None = None, **kwargs: Any) -> int:
        """Send DATA with the queue at ``queued`` bytes; the CongestionMark it went out with."""
        if queued is not None:
            self.transport.queued = queued
        self.face.send_data(DATA, **kwargs)
        return mark_of(self.transport.sent[-1])

    def at(self, t: float) -> Rig:
        self.clock.now = t
        return self


def mark_of(wire: bytes) -> int:
    return parse_lp(wire).congestion_mark if wire[0] == T.LP_PACKET else 0


ABOVE = DEFAULT_CONGESTION_THRESHOLD + 1


def test_short_queue_sends_bare_packets() -> None:
    rig = Rig()
    for queued in (0, 1000, DEFAULT_CONGESTION_THRESHOLD):  # at the threshold is not above it
        assert rig.data_mark(queued) == 0
        assert rig.transport.sent[-1] == DATA
    rig.face.send_interest(INTEREST)
    assert rig.transport.sent[-1] == INTEREST
    assert rig.counters["face.congestion_marked"] == 0


def test_long_queue_marks_and_counts() -> None:
    rig = Rig()
    rig.at(5.0)
    assert rig.data_mark(ABOVE) == 1
    lp = parse_lp(rig.transport.sent[-1])
    assert lp.fragment == DATA and lp.pit_token is None
    assert rig.counters["face.congestion_marked"] == 1
    assert rig.face.stats.n_congestion_marked == 1
    assert rig.face.status()["n_congestion_marked"] == 1


def test_at_most_one_mark_per_interval_then_faster_while_congested() -> None:
    rig = Rig()
    rig.transport.queued = ABOVE
    assert rig.at(1.0).data_mark() == 1
    # the rest of the burst, and everything until the interval has passed: unmarked
    assert [rig.data_mark() for _ in range(20)] == [0] * 20
    assert rig.at(1.0 + INTERVAL * 0.99).data_mark() == 0
    assert rig.at(1.0 + INTERVAL).data_mark() == 1
    # still congested: the next mark is due interval/sqrt(2) after the last one was due
    second_gap = INTERVAL / math.sqrt(2)
    assert rig.at(1.0 + INTERVAL + second_gap * 0.99).data_mark() == 0
    assert rig.at(1.0 + INTERVAL + second_gap).data_mark() == 1
    third_due = 1.0 + INTERVAL + second_gap + INTERVAL / math.sqrt(3)
    assert rig.at(third_due - 0.001).data_mark() == 0
    assert rig.at(third_due).data_mark() == 1
    assert rig.counters["face.congestion_marked"] == 4


def test_incident_ends_when_queue_drains_and_pace_resets() -> None:
    rig = Rig()
    rig.transport.queued = ABOVE
    assert rig.at(1.0).data_mark() == 1
    last = 1.0 + INTERVAL
    assert rig.at(last).data_mark() == 1
    assert rig.at(last + 0.05).data_mark(0) == 0  # drained: the incident is over
    # congested again soon after: the last mark was under one interval ago, so not yet...
    assert rig.at(last + 0.06).data_mark(ABOVE) == 0
    # ...and the new incident starts at the base interval, not the faster pace of the old one
    start = last + INTERVAL
    assert rig.at(start).data_mark() == 1
    assert rig.at(start + INTERVAL / math.sqrt(2)).data_mark() == 0
    assert rig.at(start + INTERVAL).data_mark() == 1


def test_threshold_is_at_most_half_the_queue_capacity() -> None:
    rig = Rig(capacity=1000)
    assert rig.face.link.congestion_threshold == 500
    assert rig.data_mark(500) == 0
    assert rig.data_mark(501) == 1
    big = Rig(capacity=10 << 20)
    assert big.face.link.congestion_threshold == DEFAULT_CONGESTION_THRESHOLD


def test_threshold_and_interval_are_configurable() -> None:
    rig = Rig(congestion_threshold=100, congestion_interval=1.0)
    assert rig.at(0.0).data_mark(101) == 1
    assert rig.at(0.5).data_mark() == 0
    assert rig.at(1.0).data_mark() == 1
    rig.face.link.configure_congestion(10_000, 0.01)
    assert rig.at(1.001).data_mark(5000) == 0
    assert rig.at(1.002).data_mark(10_001) == 1


@pytest.mark.parametrize("threshold", [-1, 1.5, True, "64k"])
def test_bad_threshold_names_the_field(threshold: Any) -> None:
    with pytest.raises(ConfigError, match="congestion_threshold"):
        LinkService(counters=Counter(), congestion_threshold=threshold)


@pytest.mark.parametrize("interval", [0, -0.1, math.nan, math.inf, "100ms"])
def test_bad_interval_names_the_field(interval: Any) -> None:
    with pytest.raises(ConfigError, match="congestion_interval"):
        LinkService(counters=Counter(), congestion_interval=interval)


def test_mark_from_upstream_is_kept_and_not_counted_as_ours() -> None:
    rig = Rig()
    assert rig.data_mark(0, congestion_mark=1) == 1
    assert rig.counters["face.congestion_marked"] == 0
    # congested too: the packet goes out marked once, with the upstream's value
    assert rig.at(1.0).data_mark(ABOVE, congestion_mark=3) == 3
    assert rig.counters["face.congestion_marked"] == 1


def test_mark_keeps_pit_token() -> None:
    rig = Rig()
    rig.transport.queued = ABOVE
    rig.face.send_data(DATA, pit_token=b"\xaa\xbb")
    lp = parse_lp(rig.transport.sent[-1])
    assert (lp.congestion_mark, lp.pit_token, lp.fragment) == (1, b"\xaa\xbb", DATA)


def test_interests_and_nacks_are_marked_too() -> None:
    rig = Rig()
    rig.transport.queued = ABOVE
    rig.at(1.0).face.send_interest(INTEREST)
    lp = parse_lp(rig.transport.sent[-1])
    assert (lp.congestion_mark, lp.fragment, lp.nack_reason) == (1, INTEREST, None)
    rig.at(1.1).face.send_nack(INTEREST, T.NACK_NO_ROUTE, pit_token=b"\x07")
    lp = parse_lp(rig.transport.sent[-1])
    assert (lp.congestion_mark, lp.nack_reason, lp.pit_token) == (1, T.NACK_NO_ROUTE, b"\x07")
    rig.at(1.15).face.send_nack(INTEREST, T.NACK_NO_ROUTE)
    lp = parse_lp(rig.transport.sent[-1])
    assert (lp.congestion_mark, lp.nack_reason) == (0, T.NACK_NO_ROUTE)
    assert rig.counters["face.congestion_marked"] == 2


def test_link_service_without_a_transport_queue_never_marks() -> None:
    counters: Counter[str] = Counter()
    link = LinkService(counters=counters, congestion_threshold=0)
    sent: list[bytes] = []
    link.output = sent.append
    link.send_data(DATA)
    link.send_interest(INTEREST)
    assert sent == [DATA, INTEREST] and counters["face.congestion_marked"] == 0


def test_memory_face_marks_on_its_peers_inbox_and_mark_survives_fragmentation() -> None:
    """The in-memory queue is the other end's inbox; a marked packet cut into fragments carries
    the mark on fragment 0 and the receiver sees it on the reassembled Data."""
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    ta, tb = memory_pair(counters, mtu=1400, call_soon=soon)
    # one mark per minute: however slowly a loaded machine sends the burst, one mark
    a, b = Face(ta, congestion_interval=60.0), Face(tb)
    sink = RecordingSink()
    b.sink = sink
    assert ta.send_queue_capacity == ta.queue_limit
    big = [make_data(from_uri(f"/big/{i}"), bytes(8000)) for i in range(12)]
    queued_before = []
    for wire in big:
        queued_before.append(ta.send_queue_length())
        a.send_data(wire)
        assert ta.send_queue_length() == tb._inbox_bytes > queued_before[-1]
    soon.run()
    assert ta.send_queue_length() == 0
    marks = [lp.congestion_mark if lp is not None else 0 for _, _, lp in sink.data]
    assert [w for _, w, _ in sink.data] == big
    # the first packet sent with more than 64 KiB queued is marked, none after it (same instant)
    first = next(i for i, q in enumerate(queued_before) if q > DEFAULT_CONGESTION_THRESHOLD)
    assert 0 < first < len(big) - 1
    assert marks == [0] * first + [1] + [0] * (len(big) - first - 1)
    assert counters["face.congestion_marked"] == 1


def test_udp_queue_is_the_sockets_buffer() -> None:
    owner = _UdpSocket()
    transport = UdpTransport(
        owner,
        ("127.0.0.1", 9),
        counters=Counter(),
        local_uri="udp4://127.0.0.1:6363",
        remote_uri="udp4://127.0.0.1:9",
        peer=("127.0.0.1", 9),
        mtu=1400,
        on_demand=True,
        send_limit=1 << 20,
    )
    assert transport.send_queue_length() == -1  # no socket
    owner.dgram = cast(Any, SimpleNamespace(get_write_buffer_size=lambda: 70_000))
    assert transport.send_queue_length() == 70_000
    assert transport.send_queue_capacity == 1 << 20
