"""Window join against references computed directly from the input (no I/O)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compute.stream.join import WindowJoin
from compute.stream.windows import MAX_WATERMARK, Out, WindowSpec

KEYS: list[Any] = ["a", "b", 3, None, ("x", 1), ("x", (None, False))]

Event = tuple[str, Any]  # ("left" | "right", (t, key, value)) or ("advance", watermark)


def starts_holding(spec: WindowSpec, t: int) -> list[int]:
    return [s for s in range(t - spec.size_ms + 1, t + 1) if s % spec.slide == 0]


def pair(start: int, end: int, key: Any, left: Any, right: Any) -> Out:
    return (end - 1, key, {"key": key, "start": start, "end": end, "left": left, "right": right})


def joined(
    spec: WindowSpec, start: int, sides: dict[Any, tuple[list[Any], list[Any]]]
) -> list[Out]:
    end = start + spec.size_ms
    return [
        pair(start, end, key, left, right)
        for key, (lefts, rights) in sides.items()
        for left in lefts
        for right in rights
    ]


def grouped(spec: WindowSpec, events: list[Event]) -> list[Out]:
    """No late record: group both sides by (window, key) in arrival order, join each window."""
    groups: dict[int, dict[Any, tuple[list[Any], list[Any]]]] = {}
    for what, arg in events:
        if what != "advance":
            t, key, value = arg
            for start in starts_holding(spec, t):
                sides = groups.setdefault(start, {}).setdefault(key, ([], []))
                sides[what == "right"].append(value)
    return [o for start in sorted(groups) for o in joined(spec, start, groups[start])]


def simulated(spec: WindowSpec, events: list[Event]) -> tuple[list[Out], int]:
    """A record goes into each of its windows whose end is above the watermark, else it is
    dropped for that window; a watermark moving from W0 to W joins windows with W0 < end <= W."""
    watermark = -(2**63)
    groups: dict[int, dict[Any, tuple[list[Any], list[Any]]]] = {}
    outputs: list[Out] = []
    dropped = 0
    for what, arg in [*events, ("advance", MAX_WATERMARK)]:
        if what != "advance":
            t, key, value = arg
            for start in starts_holding(spec, t):
                if start + spec.size_ms <= watermark:
                    dropped += 1
                else:
                    sides = groups.setdefault(start, {}).setdefault(key, ([], []))
                    sides[what == "right"].append(value)
        elif arg > watermark:
            for start in sorted(groups):
                if watermark < start + spec.size_ms <= arg:
                    outputs += joined(spec, start, groups[start])
            watermark = arg
    return outputs, dropped


def run(join: WindowJoin, events: list[Event]) -> list[Out]:
    outputs: list[Out] = []
    for what, arg in events:
        if what == "advance":
            outputs += join.advance(arg)
        else:
            t, key, value = arg
            add = join.add_left if what == "left" else join.add_right
            assert add(key, t, value) == []
    return outputs


@st.composite
def streams(draw: st.DrawFn, *, lag: int = 0) -> tuple[WindowSpec, list[Event]]:
    size = draw(st.integers(1, 30))
    spec = WindowSpec(size, draw(st.none() | st.integers(1, size)))
    bound = draw(st.integers(0, 20))
    ideal = draw(st.integers(-50, 50))
    max_seen = -(2**63)
    events: list[Event] = []
    for i in range(draw(st.integers(0, 50))):
        ideal += draw(st.integers(0, 6))
        t = ideal - draw(st.integers(0, bound))
        side = draw(st.sampled_from(["left", "right"]))
        events.append((side, (t, draw(st.sampled_from(KEYS)), {"i": i, "t": t})))
        max_seen = max(max_seen, t)
        if draw(st.booleans()):
            events.append(("advance", max_seen - bound + lag))
    return spec, events


@settings(max_examples=150, deadline=None)
@given(streams())
def test_in_order_watermarks_give_the_grouped_join(stream: tuple[WindowSpec, list[Event]]) -> None:
    spec, events = stream
    join = WindowJoin(spec)
    outputs = run(join, events) + join.flush()
    assert outputs == grouped(spec, events)
    assert join.counters["late_dropped"] == 0
    assert join.counters["fired"] == len(outputs)
    assert join.buffered == 0


@settings(max_examples=150, deadline=None)
@given(streams(lag=10))
def test_late_records_are_dropped_and_counted(stream: tuple[WindowSpec, list[Event]]) -> None:
    spec, events = stream
    join = WindowJoin(spec)
    outputs = run(join, events) + join.flush()
    expected, dropped = simulated(spec, events)
    assert outputs == expected
    assert join.counters["late_dropped"] == dropped


def test_cross_product_left_major_in_arrival_order() -> None:
    join = WindowJoin(WindowSpec(10))
    join.add_right("k", 5, "r1")
    join.add_left("k", 9, "l1")
    join.add_left("only-left", 1, "x")
    join.add_right("k", 0, "r2")
    join.add_left("k", 2, "l2")
    join.add_right("only-right", 3, "y")
    assert join.advance(9) == []
    assert join.advance(10) == [
        pair(0, 10, "k", "l1", "r1"),
        pair(0, 10, "k", "l1", "r2"),
        pair(0, 10, "k", "l2", "r1"),
        pair(0, 10, "k", "l2", "r2"),
    ]
    assert join.buffered == 0
    join.add_left("k", 9, "late")
    assert join.counters["late_dropped"] == 1
    assert join.flush() == []


def test_allowed_lateness_is_ignored() -> None:
    join = WindowJoin(WindowSpec(10, allowed_lateness_ms=100))
    join.add_left("k", 1, "l")
    join.advance(10)
    join.add_right("k", 2, "r")
    assert join.counters["late_dropped"] == 1
    assert join.flush() == []


@settings(max_examples=150, deadline=None)
@given(streams(lag=5), st.data())
def test_restore_from_msgpack_gives_the_same_outputs(
    stream: tuple[WindowSpec, list[Event]], data: st.DataObject
) -> None:
    spec, events = stream
    cut = data.draw(st.integers(0, len(events)))
    straight = WindowJoin(spec)
    expected = run(straight, events) + straight.flush()

    first = WindowJoin(spec)
    outputs = run(first, events[:cut])
    packed = msgpack.packb(first.snapshot())
    second = WindowJoin.restore(spec, msgpack.unpackb(packed))
    assert second.buffered == first.buffered
    outputs += run(second, events[cut:]) + second.flush()
    assert outputs == expected
    assert second.counters == straight.counters


def test_tuple_and_none_keys_survive_a_snapshot() -> None:
    spec = WindowSpec(10)
    join = WindowJoin(spec)
    keys: list[Any] = [("a", 1), None, ("a", (None, 2.5)), ()]
    for key in keys:
        join.add_left(key, 1, "l")
    restored = WindowJoin.restore(spec, msgpack.unpackb(msgpack.packb(join.snapshot())))
    for key in keys:
        restored.add_right(key, 2, "r")
    assert restored.advance(10) == [pair(0, 10, key, "l", "r") for key in keys]


def test_restore_checks_the_spec() -> None:
    snap = msgpack.unpackb(msgpack.packb(WindowJoin(WindowSpec(10)).snapshot()))
    with pytest.raises(ValueError, match="restore with the WindowSpec"):
        WindowJoin.restore(WindowSpec(10, 5), snap)
    with pytest.raises(ValueError, match="not a WindowJoin snapshot"):
        WindowJoin.restore(WindowSpec(10), {**snap, "kind": "WindowState"})


def test_buffer_beyond_the_bound_is_dropped_and_counted() -> None:
    join = WindowJoin(WindowSpec(10, 5), max_buffered=3)
    join.add_left("k", 7, "l1")  # two windows: two entries
    join.add_right("k", 8, "r1")  # [0, 10) held, [5, 15) over the bound
    assert join.counters["state_full"] == 1
    assert join.buffered == 3
    join.add_right("k", 12, "r2")  # [5, 15) and [10, 20): both over
    assert join.counters["state_full"] == 3
    assert join.advance(10) == [pair(0, 10, "k", "l1", "r1")]
    assert join.buffered == 1
    join.add_right("k", 12, "r3")  # room again, in both windows
    assert join.buffered == 3
    assert join.flush() == [pair(5, 15, "k", "l1", "r3")]


def test_bad_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_buffered"):
        WindowJoin(WindowSpec(10), max_buffered=0)
