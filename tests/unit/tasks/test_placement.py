"""Placement without sockets: locality first when the holder has room, then load; full and
lost executors passed over; resources honoured; a window of calls per executor."""

from __future__ import annotations

from compute.tasks.placement import FULL_BACKOFF, LOST_BACKOFF, MAX_INFLIGHT, Placement


def three() -> Placement:
    p = Placement()
    for node in ("a", "b", "c"):
        p.report(node, load=0, slots=1, memory=0, now=0.0)
    return p


def test_the_holder_of_the_largest_input_is_chosen_when_it_has_room() -> None:
    p = three()
    assert p.choose(1, 0, [(["c"], 10), (["b"], 1_000_000)], now=0.0) == "b"
    assert p.chosen_for_locality == 1


def test_a_busy_holder_loses_the_task_to_the_least_loaded() -> None:
    p = three()
    p.report("b", load=50, slots=1, memory=0, now=0.0)
    p.report("a", load=3, slots=1, memory=0, now=0.0)
    assert p.choose(1, 0, [(["b"], 1_000_000)], now=0.0) == "c"
    assert p.chosen_by_load == 1


def test_load_is_per_slot_and_counts_this_callers_calls_in_flight() -> None:
    p = three()
    p.report("a", load=4, slots=8, memory=0, now=0.0)  # 0.5 per slot
    p.report("b", load=1, slots=1, memory=0, now=0.0)
    p.executors["c"].inflight = 2  # not yet in its advertisement
    assert p.choose(1, 0, [], now=0.0) == "a"


def test_full_and_lost_executors_are_passed_over_for_a_while() -> None:
    p = three()
    p.full("a", now=0.0)
    p.lost("b", now=0.0)
    assert p.choose(1, 0, [], now=0.0) == "c"
    assert p.choose(1, 0, [], now=0.0, avoid=frozenset({"c"})) is None
    assert p.choose(1, 0, [], now=FULL_BACKOFF + 0.001, avoid=frozenset({"c"})) == "a"
    assert p.choose(1, 0, [], now=LOST_BACKOFF + 1, avoid=frozenset({"a", "c"})) == "b"
    p.lost("b", now=10.0)
    p.report("b", load=0, slots=1, memory=0, now=10.1)  # it advertises again: back at once
    assert p.choose(1, 0, [], now=10.1, avoid=frozenset({"a", "c"})) == "b"


def test_cpus_and_memory_are_honoured() -> None:
    p = Placement()
    p.report("small", load=0, slots=1, memory=1 << 30, now=0.0, memory_total=1 << 30)
    p.report("big", load=5, slots=8, memory=64 << 30, now=0.0, memory_total=64 << 30)
    assert p.choose(4, 0, [], now=0.0) == "big"
    assert p.choose(1, 8 << 30, [], now=0.0) == "big"
    assert p.choose(16, 0, [], now=0.0) is None
    assert p.infeasible(16, 0) is not None and "at most 8 CPUs" in str(p.infeasible(16, 0))
    assert p.infeasible(1, 128 << 30) is not None
    p.report("big", load=5, slots=8, memory=0, now=0.0, memory_total=64 << 30)  # all in use
    assert p.choose(1, 8 << 30, [], now=0.0) is None  # for now
    assert p.infeasible(1, 8 << 30) is None  # not for ever
    p.report("any", load=0, slots=8, memory=0, now=0.0)  # no memory limit: takes anything
    assert p.infeasible(1, 128 << 30) is None


def test_a_window_of_calls_per_executor_deeper_for_short_tasks() -> None:
    p = Placement()
    p.report("a", load=0, slots=1, memory=0, now=0.0)
    state = p.executors["a"]
    state.inflight = state.window()
    assert p.choose(1, 0, [], now=0.0) is None  # long tasks: the rest wait at the caller
    for _ in range(40):
        p.ran("a", 0.0002)
    assert state.window() == MAX_INFLIGHT
    assert p.choose(1, 0, [], now=0.0) == "a"


def test_executors_that_left_are_forgotten() -> None:
    p = three()
    p.forget_missing({"a"})
    assert set(p.executors) == {"a"}
