"""Event-time windows against references computed directly from the input (no I/O)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compute.stream.aggregates import Aggregate, AggregateError, make_aggregate
from compute.stream.windows import MAX_WATERMARK, Out, WindowSpec, WindowState

KEYS: list[Any] = ["a", "b", 7, -3, None, True, 2.5, ("x", 1), ("x", None), ("n", ("m", False)), ()]

# ---- references -----------------------------------------------------------------------------


def starts_holding(spec: WindowSpec, t: int) -> list[int]:
    """Every aligned start s with s <= t < s + size, by scanning: obviously correct."""
    return [s for s in range(t - spec.size_ms + 1, t + 1) if s % spec.slide == 0]


def fold(kind: str, values: list[Any]) -> Any:
    if kind == "count":
        return len(values)
    if kind in ("sum", "mean"):
        total = 0
        for value in values:
            total += value
        return total if kind == "sum" else float(total / len(values))
    if kind == "min":
        return min(values)
    if kind == "max":
        return max(values)
    assert kind == "concat"  # a reduce: the first value is the initial accumulator
    acc = values[0]
    for value in values[1:]:
        acc = f"{acc}|{value}"
    return acc


def aggregate_of(kind: str) -> Aggregate:
    if kind == "concat":
        return make_aggregate("reduce", reduce=lambda a, b: f"{a}|{b}")
    return make_aggregate(kind)


def out(start: int, end: int, key: Any, value: Any) -> Out:
    return (end - 1, key, {"key": key, "start": start, "end": end, "value": value})


def grouped(spec: WindowSpec, records: list[tuple[int, Any, Any]], kind: str) -> list[Out]:
    """Results with no late record: group by (window, key), fold in arrival order, order by
    (end, start, key first seen in the window)."""
    groups: dict[int, dict[Any, list[Any]]] = {}
    for t, key, value in records:
        for start in starts_holding(spec, t):
            groups.setdefault(start, {}).setdefault(key, []).append(value)
    return [
        out(start, start + spec.size_ms, key, fold(kind, values))
        for start in sorted(groups)
        for key, values in groups[start].items()
    ]


Event = tuple[str, Any]  # ("add", (t, key, value)) or ("advance", watermark)


def simulated(spec: WindowSpec, events: list[Event], kind: str) -> tuple[list[Out], int]:
    """Outputs and late drops of a run, straight from the rules: a record goes into each of its
    windows whose end is above the watermark, or (a late update, emitted) while end + lateness
    is; a watermark moving from W0 to W fires the windows with W0 < end <= W."""
    size, lateness = spec.size_ms, spec.allowed_lateness_ms
    watermark = -(2**63)
    groups: dict[int, dict[Any, list[Any]]] = {}
    outputs: list[Out] = []
    dropped = 0
    for what, arg in [*events, ("advance", MAX_WATERMARK)]:
        if what == "add":
            t, key, value = arg
            for start in starts_holding(spec, t):
                end = start + size
                if end + lateness <= watermark:
                    dropped += 1
                    continue
                values = groups.setdefault(start, {}).setdefault(key, [])
                values.append(value)
                if end <= watermark:
                    outputs.append(out(start, end, key, fold(kind, values)))
        elif arg > watermark:
            for start in sorted(groups):
                if watermark < start + size <= arg:
                    for key, values in groups[start].items():
                        outputs.append(out(start, start + size, key, fold(kind, values)))
            watermark = arg
    return outputs, dropped


def run(state: WindowState, events: list[Event]) -> list[Out]:
    outputs: list[Out] = []
    for what, arg in events:
        if what == "add":
            t, key, value = arg
            outputs += state.add(key, t, value)
        else:
            outputs += state.advance(arg)
    return outputs


@st.composite
def streams(draw: st.DrawFn, *, lag: int = 0) -> tuple[WindowSpec, list[Event], int]:
    """A spec and records at most ``bound`` ms out of order; after some records a watermark
    max_seen - bound + ``lag`` (lag > 0: some records come late)."""
    size = draw(st.integers(1, 40))
    slide = draw(st.none() | st.integers(1, size))
    lateness = draw(st.integers(0, 30)) if lag else 0
    spec = WindowSpec(size, slide, lateness)
    bound = draw(st.integers(0, 25))
    ideal = draw(st.integers(-100, 100))
    max_seen = -(2**63)
    events: list[Event] = []
    for _ in range(draw(st.integers(0, 60))):
        ideal += draw(st.integers(0, 8))
        t = ideal - draw(st.integers(0, bound))
        key = draw(st.sampled_from(KEYS))
        value = draw(st.floats(-1e6, 1e6) | st.integers(-1000, 1000))
        events.append(("add", (t, key, value)))
        max_seen = max(max_seen, t)
        if draw(st.booleans()):
            events.append(("advance", max_seen - bound + lag))
    return spec, events, bound


KINDS = ["count", "sum", "mean", "min", "max", "concat"]

# ---- spec -----------------------------------------------------------------------------------


@given(st.integers(1, 30), st.data(), st.integers(-200, 200))
def test_windows_of_are_every_window_holding_t(size: int, data: st.DataObject, t: int) -> None:
    slide = data.draw(st.none() | st.integers(1, size))
    spec = WindowSpec(size, slide)
    expected = [(s, s + size) for s in starts_holding(spec, t)]
    assert spec.windows_of(t) == expected
    assert len(expected) <= -(-size // spec.slide)


def test_windows_of_examples() -> None:
    assert WindowSpec(1000).windows_of(1999) == [(1000, 2000)]
    assert WindowSpec(1000).windows_of(-1) == [(-1000, 0)]
    assert WindowSpec(10, 4).windows_of(9) == [(0, 10), (4, 14), (8, 18)]
    assert WindowSpec(10, 4).windows_of(-1) == [(-8, 2), (-4, 6)]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"size_ms": 0}, "size_ms"),
        ({"size_ms": -5}, "size_ms"),
        ({"size_ms": 1.5}, "size_ms"),
        ({"size_ms": 10, "slide_ms": 0}, "slide_ms"),
        ({"size_ms": 10, "slide_ms": 11}, "slide_ms"),
        ({"size_ms": 10, "allowed_lateness_ms": -1}, "allowed_lateness_ms"),
    ],
)
def test_bad_spec_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        WindowSpec(**kwargs)


# ---- results against the references ---------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(streams(), st.sampled_from(KINDS))
def test_in_order_watermarks_give_the_grouped_results(
    stream: tuple[WindowSpec, list[Event], int], kind: str
) -> None:
    spec, events, _ = stream
    state = WindowState(spec, aggregate_of(kind))
    outputs = run(state, events) + state.flush()
    records = [arg for what, arg in events if what == "add"]
    assert outputs == grouped(spec, records, kind)
    assert state.counters["late_dropped"] == 0
    assert state.counters["records"] == len(records)
    assert state.counters["fired"] == len(outputs)


@settings(max_examples=150, deadline=None)
@given(streams(lag=12), st.sampled_from(KINDS))
def test_late_records_follow_the_rules(
    stream: tuple[WindowSpec, list[Event], int], kind: str
) -> None:
    spec, events, _ = stream
    state = WindowState(spec, aggregate_of(kind))
    outputs = run(state, events) + state.flush()
    expected, dropped = simulated(spec, events, kind)
    assert outputs == expected
    assert state.counters["late_dropped"] == dropped


def test_tumbling_mean_by_key_with_out_of_order_input() -> None:
    state = WindowState(WindowSpec(1000), make_aggregate("mean", field="v"))
    assert state.add("a", 1500, {"v": 1.0}) == []
    assert state.add("b", 900, {"v": 5.0}) == []
    assert state.add("a", 1100, {"v": 2.0}) == []
    assert state.add("b", 50, {"v": 7.0}) == []
    assert state.advance(999) == []
    assert state.advance(1000) == [out(0, 1000, "b", 6.0)]
    assert state.advance(500) == []  # backwards: ignored
    assert state.watermark == 1000
    assert state.add("b", 1999, {"v": 1.0}) == []
    assert state.advance(2500) == [out(1000, 2000, "a", 1.5), out(1000, 2000, "b", 1.0)]


def test_fired_in_order_of_end_then_key_first_seen() -> None:
    state = WindowState(WindowSpec(10, 5), make_aggregate("count"))
    for key, t in [("z", 12), ("y", 3), ("z", 7), ("x", 8)]:
        state.add(key, t, None)
    assert [(o[2]["start"], o[1]) for o in state.advance(100)] == [
        (-5, "y"),
        (0, "y"),
        (0, "z"),
        (0, "x"),
        (5, "z"),
        (5, "x"),
        (10, "z"),
    ]


# ---- lateness and purge ---------------------------------------------------------------------


def test_late_record_within_lateness_updates_beyond_is_dropped() -> None:
    state = WindowState(WindowSpec(10, allowed_lateness_ms=5), make_aggregate("sum"))
    state.add("k", 3, 1)
    assert state.advance(10) == [out(0, 10, "k", 1)]
    assert state.add("k", 4, 10) == [out(0, 10, "k", 11)]  # 10 + 5 > 10: late update
    assert state.add("new", 9, 2) == [out(0, 10, "new", 2)]  # a key new to the fired window
    assert state.advance(14) == []
    assert state.add("k", 5, 100) == [out(0, 10, "k", 111)]
    assert state.counters["late_fired"] == 3
    assert state.open_windows == 2
    assert state.advance(15) == []  # end + lateness <= 15: purged
    assert state.open_windows == 0
    assert state.add("k", 6, 1000) == []
    assert state.counters["late_dropped"] == 1
    assert state.flush() == []


def test_without_lateness_a_record_behind_the_watermark_is_dropped() -> None:
    state = WindowState(WindowSpec(10), make_aggregate("count"))
    state.add("k", 1, None)
    state.advance(10)
    assert state.open_windows == 0
    assert state.add("k", 9, None) == []
    assert state.add("k", 10, None) == []  # the next window is open
    assert state.counters["late_dropped"] == 1
    assert state.flush() == [out(10, 20, "k", 1)]


def test_sliding_late_record_dropped_per_window_it_missed() -> None:
    state = WindowState(WindowSpec(10, 5, allowed_lateness_ms=3), make_aggregate("count"))
    state.add("k", 7, None)  # windows [0, 10) and [5, 15)
    assert state.advance(13) == [out(0, 10, "k", 1)]  # [0, 10) purged: 10 + 3 <= 13
    assert state.add("k", 8, None) == []  # [0, 10) dropped, [5, 15) still open
    assert state.counters["late_dropped"] == 1
    assert state.advance(16) == [out(5, 15, "k", 2)]
    assert state.add("k", 9, None) == [out(5, 15, "k", 3)]  # [0, 10) dropped, [5, 15) late
    assert state.counters["late_dropped"] == 2


def test_flush_fires_everything_and_ends_the_stream() -> None:
    state = WindowState(WindowSpec(10, 5, allowed_lateness_ms=1000), make_aggregate("count"))
    state.add("k", 7, None)
    assert state.advance(10) == [out(0, 10, "k", 1)]
    assert state.flush() == [out(5, 15, "k", 1)]
    assert state.watermark == MAX_WATERMARK
    assert state.open_windows == 0
    assert state.flush() == []


# ---- snapshot and restore -------------------------------------------------------------------


def msgpack_round_trip(snap: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(snap))


@settings(max_examples=150, deadline=None)
@given(streams(lag=6), st.sampled_from(KINDS), st.data())
def test_restore_from_msgpack_gives_the_same_outputs(
    stream: tuple[WindowSpec, list[Event], int], kind: str, data: st.DataObject
) -> None:
    spec, events, _ = stream
    cut = data.draw(st.integers(0, len(events)))
    straight = WindowState(spec, aggregate_of(kind))
    expected = run(straight, events) + straight.flush()

    first = WindowState(spec, aggregate_of(kind))
    outputs = run(first, events[:cut])
    snap = first.snapshot()
    packed = msgpack.packb(snap)
    run(first, events[cut:])  # the snapshot is a copy: later records do not change it
    assert msgpack.packb(snap) == packed
    second = WindowState.restore(spec, aggregate_of(kind), msgpack.unpackb(packed))
    outputs += run(second, events[cut:]) + second.flush()
    assert outputs == expected
    assert second.counters == straight.counters


def test_tuple_and_none_keys_come_back_as_they_were() -> None:
    state = WindowState(WindowSpec(10), make_aggregate("sum"))
    keys: list[Any] = [("a", 1), None, ("a", (None, 2.5, True)), (), "a", 1]
    for key in keys:
        state.add(key, 1, 1)
    restored = WindowState.restore(
        WindowSpec(10), make_aggregate("sum"), msgpack_round_trip(state.snapshot())
    )
    for key in keys:
        restored.add(key, 2, 1)
    fired = restored.advance(10)
    assert [o[1] for o in fired] == keys
    assert [type(o[1]) for o in fired] == [type(key) for key in keys]
    assert all(o[2]["value"] == 2 for o in fired)


def test_restore_checks_the_spec_and_the_snapshot() -> None:
    state = WindowState(WindowSpec(10), make_aggregate("count"))
    snap = msgpack_round_trip(state.snapshot())
    with pytest.raises(ValueError, match="restore with the WindowSpec"):
        WindowState.restore(WindowSpec(20), make_aggregate("count"), snap)
    with pytest.raises(ValueError, match="not a WindowState snapshot"):
        WindowState.restore(WindowSpec(10), make_aggregate("count"), [1, 2])
    with pytest.raises(ValueError, match="version"):
        WindowState.restore(WindowSpec(10), make_aggregate("count"), {**snap, "version": 99})
    with pytest.raises(ValueError, match="malformed"):
        WindowState.restore(WindowSpec(10), make_aggregate("count"), {**snap, "windows": 3})


def test_snapshot_maps_have_str_keys_only() -> None:
    state = WindowState(WindowSpec(10, 5), make_aggregate("mean"))
    state.add(("t", 1), 3, 1.0)
    state.add(5, 12, 2.0)

    def check(data: Any) -> None:
        if isinstance(data, dict):
            assert all(isinstance(k, str) for k in data)
            for v in data.values():
                check(v)
        elif isinstance(data, list):
            for v in data:
                check(v)

    snap = state.snapshot()
    check(snap)
    assert msgpack.unpackb(msgpack.packb(snap), strict_map_key=True) == snap


# ---- bounded state --------------------------------------------------------------------------


def test_state_beyond_the_bound_is_dropped_and_counted() -> None:
    state = WindowState(WindowSpec(10), make_aggregate("count"), max_open_windows=2)
    for key in ("a", "b", "c", "a"):
        assert state.add(key, 1, None) == []
    assert state.counters["state_full"] == 1
    assert state.add("d", 15, None) == []  # a new window is a new (key, window) too
    assert state.counters["state_full"] == 2
    assert state.advance(10) == [out(0, 10, "a", 2), out(0, 10, "b", 1)]
    assert state.open_windows == 0
    state.add("d", 15, None)  # room again after the purge
    assert state.flush() == [out(10, 20, "d", 1)]


def test_sliding_record_partly_over_the_bound() -> None:
    state = WindowState(WindowSpec(10, 5), make_aggregate("count"), max_open_windows=1)
    state.add("a", 7, None)  # [0, 10) held, [5, 15) over the bound
    assert state.counters["state_full"] == 1
    assert state.flush() == [out(0, 10, "a", 1)]


def test_a_bad_value_raises_and_holds_nothing() -> None:
    state = WindowState(WindowSpec(10, 5), make_aggregate("sum", field="v"))
    with pytest.raises(AggregateError, match="'v'"):
        state.add("k", 7, {"w": 1})
    assert state.open_windows == 0
    assert state.snapshot()["windows"] == []
    assert state.flush() == []


def test_bad_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_open_windows"):
        WindowState(WindowSpec(10), make_aggregate("count"), max_open_windows=0)
