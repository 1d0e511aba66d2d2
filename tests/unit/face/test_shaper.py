"""Link shaper on a fake clock: loss statistics, delay/jitter, rate serialization, bounds."""

from __future__ import annotations

from collections import Counter
from statistics import mean

import pytest

from forwarder.face.face import Face
from forwarder.face.memory import memory_pair
from forwarder.face.shaper import Shaper, ShaperConfig
from icn.errors import ConfigError
from tests.unit.face.helpers import FakeClock, ManualSoon, RecordingSink


class Out:
    """Records (time, packet) of everything the shaper lets out."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[float, bytes]] = []

    def __call__(self, wire: bytes) -> None:
        self.sent.append((self.clock.now, wire))

    @property
    def packets(self) -> list[bytes]:
        return [w for _, w in self.sent]


def make(config: ShaperConfig) -> tuple[Shaper, Out, FakeClock, Counter[str]]:
    clock = FakeClock()
    out = Out(clock)
    counters: Counter[str] = Counter()
    shaper = Shaper(config, out, counters=counters, call_later=clock.call_later, clock=clock.time)
    return shaper, out, clock, counters


def test_loss_rate_about_ten_percent() -> None:
    shaper, out, clock, counters = make(ShaperConfig(loss=0.1, seed=7))
    for i in range(10_000):
        shaper.send(i.to_bytes(2, "big"))
    lost = counters["shaper.loss"]
    assert 850 <= lost <= 1150  # 1000 +- 5 sigma
    assert shaper.dropped == lost
    assert len(out.sent) == 10_000 - lost
    assert clock.pending_timers == 0  # loss alone never delays


def test_loss_is_deterministic_with_a_seed() -> None:
    runs = []
    for _ in range(2):
        shaper, out, _, _ = make(ShaperConfig(loss=0.3, seed=42))
        for i in range(500):
            shaper.send(i.to_bytes(2, "big"))
        runs.append(out.packets)
    assert runs[0] == runs[1]
    shaper, out, _, _ = make(ShaperConfig(loss=0.3, seed=43))
    for i in range(500):
        shaper.send(i.to_bytes(2, "big"))
    assert out.packets != runs[0]


def test_delay_without_jitter_keeps_order_and_timing() -> None:
    shaper, out, clock, _ = make(ShaperConfig(delay=0.05))
    for i in range(10):
        shaper.send(bytes([i]))
        clock.advance(0.001)
    assert out.sent == []
    clock.advance(0.1)
    assert out.packets == [bytes([i]) for i in range(10)]
    for i, (t, _) in enumerate(out.sent):
        assert t == pytest.approx(i * 0.001 + 0.05, abs=0.0011)


def test_same_departure_time_keeps_arrival_order_with_one_timer() -> None:
    shaper, out, clock, _ = make(ShaperConfig(delay=0.02))
    for i in range(100):
        shaper.send(bytes([i]))
    assert clock.pending_timers == 1
    clock.advance(0.02)
    assert out.packets == [bytes([i]) for i in range(100)]


def test_jitter_stays_in_bounds_and_averages_to_delay() -> None:
    shaper, out, clock, _ = make(ShaperConfig(delay=0.1, jitter=0.02, seed=3))
    sent_at: dict[bytes, float] = {}
    for i in range(2000):
        wire = i.to_bytes(2, "big")
        sent_at[wire] = clock.now
        shaper.send(wire)
        clock.advance(0.0005)
    clock.run_all()
    assert len(out.sent) == 2000
    delays = [t - sent_at[w] for t, w in out.sent]
    assert min(delays) >= 0.08 - 0.0011 and max(delays) <= 0.12 + 0.0011
    assert mean(delays) == pytest.approx(0.1, abs=0.002)
    assert out.packets != sorted(out.packets)  # jitter reorders, as netem's does


def test_rate_serializes_packets() -> None:
    # 1000-byte packets at 80 kbit/s: 0.1 s each
    shaper, out, clock, _ = make(ShaperConfig(rate=80_000, queue_limit=10_000))
    for i in range(5):
        shaper.send(bytes([i]) * 1000)
    clock.run_all()
    times = [t for t, _ in out.sent]
    assert times == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5], abs=0.0011)
    assert [w[0] for w in out.packets] == [0, 1, 2, 3, 4]
    # an idle link starts again from now, not from the last departure
    clock.advance(10.0)
    shaper.send(b"x" * 1000)
    clock.run_all()
    assert out.sent[-1][0] == pytest.approx(10.6, abs=0.0011)


def test_rate_plus_delay() -> None:
    shaper, out, clock, _ = make(ShaperConfig(rate=80_000, delay=1.0))
    shaper.send(b"a" * 1000)
    shaper.send(b"b" * 1000)
    clock.run_all()
    assert [t for t, _ in out.sent] == pytest.approx([1.1, 1.2], abs=0.0011)


def test_rate_queue_overflow_is_counted() -> None:
    shaper, out, clock, counters = make(ShaperConfig(rate=80_000, queue_limit=2500))
    for _ in range(5):
        shaper.send(b"p" * 1000)
    assert counters["shaper.queue_full"] == 3 and shaper.dropped == 3
    clock.run_all()
    assert len(out.sent) == 2


def test_max_pending_bounds_delayed_packets() -> None:
    shaper, out, clock, counters = make(ShaperConfig(delay=1.0, max_pending=10))
    for _ in range(15):
        shaper.send(b"d")
    assert counters["shaper.queue_full"] == 5 and shaper.pending == 10
    assert shaper.dropped == 5
    clock.run_all()
    assert len(out.sent) == 10


def test_close_drops_pending_and_cancels_timer() -> None:
    shaper, out, clock, _ = make(ShaperConfig(delay=1.0))
    shaper.send(b"x")
    shaper.close()
    shaper.send(b"y")
    clock.run_all()
    assert out.sent == [] and shaper.pending == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"loss": 1.5}, {"loss": -0.1}, {"delay": -1}, {"jitter": -1}, {"rate": 0}, {"queue_limit": 0}],
)
def test_bad_config_is_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        ShaperConfig(**kwargs)  # type: ignore[arg-type]


def test_face_send_path_goes_through_the_shaper() -> None:
    counters: Counter[str] = Counter()
    soon = ManualSoon()
    clock = FakeClock()
    ta, tb = memory_pair(counters, call_soon=soon)
    a, b = Face(ta), Face(tb)
    sink = RecordingSink()
    b.sink = sink
    a.set_shaper(ShaperConfig(delay=0.5), call_later=clock.call_later, clock=clock.time)
    interest = b"\x05\x03\x07\x01\x00"
    a.send_interest(interest)
    soon.run()
    assert sink.total == 0
    clock.advance(0.5)
    soon.run()
    assert len(sink.interests) == 1
    # removing the shaper sends directly again
    a.set_shaper(None)
    a.send_interest(interest)
    soon.run()
    assert len(sink.interests) == 2
    # closing the face drops what a shaper still holds
    a.set_shaper(ShaperConfig(delay=0.5), call_later=clock.call_later, clock=clock.time)
    a.send_interest(interest)
    a.close()
    clock.run_all()
    assert len(sink.interests) == 2
