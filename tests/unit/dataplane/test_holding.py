"""The holding table on a hand-driven clock: a bound, expiry, one answer per reply path, the
counters, and the one timer a shell arms from next_expiry()."""

from __future__ import annotations

from icn.dataplane.holding import HoldingTable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def table(max_entries: int = 8) -> HoldingTable[int, str]:
    return HoldingTable(max_entries)


def test_publish_answers_every_reply_path_held_for_the_key_once() -> None:
    clock = Clock()
    t = table()
    assert t.hold(7, "a", clock.now + 1.0, clock.now)
    assert t.hold(7, "b", clock.now + 1.0, clock.now)
    assert t.hold(8, "a", clock.now + 1.0, clock.now)
    assert len(t) == 3 and 7 in t and 8 in t
    clock.advance(0.5)
    assert sorted(t.publish(7, clock.now)) == ["a", "b"]
    assert 7 not in t and len(t) == 1
    assert list(t.publish(7, clock.now)) == []  # nothing left for it
    assert (t.held, t.answered) == (3, 2)


def test_a_retransmission_on_the_path_it_repeats_is_answered_once_and_extends_the_wait() -> None:
    clock = Clock()
    t = table()
    assert t.hold(1, "face", clock.now + 1.0, clock.now)
    clock.advance(0.8)
    assert t.hold(1, "face", clock.now + 1.0, clock.now)  # the retransmission
    assert len(t) == 1 and (t.held, t.duplicates) == (1, 1)
    clock.advance(0.5)  # past the first one's expiry, within the second's
    assert list(t.publish(1, clock.now)) == ["face"]
    assert (t.answered, t.expired) == (1, 0)


def test_a_retransmission_with_an_earlier_expiry_keeps_the_later_one() -> None:
    clock = Clock()
    t = table()
    t.hold(1, "face", clock.now + 4.0, clock.now)
    t.hold(1, "face", clock.now + 1.0, clock.now)
    assert t.next_expiry() == clock.now + 4.0
    clock.advance(2.0)
    assert list(t.expire(clock.now)) == []
    assert list(t.publish(1, clock.now)) == ["face"]


def test_a_path_held_again_after_it_expired_unanswered_is_a_new_hold() -> None:
    clock = Clock()
    t = table()
    t.hold(1, "face", clock.now + 1.0, clock.now)
    clock.advance(2.0)
    t.hold(1, "face", clock.now + 1.0, clock.now)
    assert (t.held, t.duplicates, t.expired) == (2, 0, 1)
    assert list(t.publish(1, clock.now)) == ["face"]


def test_expired_paths_are_not_answered_and_are_counted() -> None:
    clock = Clock()
    t = table()
    t.hold(1, "early", clock.now + 0.5, clock.now)
    t.hold(1, "late", clock.now + 2.0, clock.now)
    clock.advance(1.0)
    assert list(t.publish(1, clock.now)) == ["late"]
    assert (t.answered, t.expired) == (1, 1)
    assert len(t) == 0


def test_a_lone_path_that_expired_is_not_answered() -> None:
    clock = Clock()
    t = table()
    t.hold(1, "a", clock.now + 0.5, clock.now)
    clock.advance(0.5)
    assert list(t.publish(1, clock.now)) == []
    assert (t.answered, t.expired, len(t)) == (0, 1, 0)


def test_an_interest_already_expired_is_not_held_nor_refused() -> None:
    clock = Clock()
    t = table(max_entries=1)
    assert t.hold(1, "a", clock.now, clock.now)
    assert len(t) == 0 and (t.held, t.expired, t.refused) == (0, 1, 0)


def test_the_bound_refuses_new_paths_and_counts_them() -> None:
    clock = Clock()
    t = table(max_entries=2)
    assert t.hold(1, "a", clock.now + 1.0, clock.now)
    assert t.hold(2, "a", clock.now + 1.0, clock.now)
    assert not t.hold(3, "a", clock.now + 1.0, clock.now)
    assert not t.hold(1, "b", clock.now + 1.0, clock.now)
    assert t.hold(1, "a", clock.now + 2.0, clock.now)  # a retransmission takes no room
    assert (len(t), t.refused, t.duplicates) == (2, 2, 1)
    assert 3 not in t
    t.publish(1, clock.now)
    assert t.hold(3, "a", clock.now + 1.0, clock.now)  # room again


def test_expire_returns_what_it_lets_go_in_expiry_order() -> None:
    clock = Clock()
    t = table()
    t.hold(1, "a", clock.now + 3.0, clock.now)
    t.hold(2, "b", clock.now + 1.0, clock.now)
    t.hold(3, "c", clock.now + 2.0, clock.now)
    assert list(t.expire(clock.now)) == []
    clock.advance(2.0)
    assert list(t.expire(clock.now)) == [(2, "b"), (3, "c")]
    assert (len(t), t.expired) == (1, 2)
    assert 2 not in t and 1 in t
    clock.advance(5.0)
    assert list(t.expire(clock.now)) == [(1, "a")]
    assert len(t) == 0 and t.next_expiry() is None


def test_next_expiry_skips_paths_answered_dropped_or_extended() -> None:
    clock = Clock()
    t = table()
    assert t.next_expiry() is None
    t.hold(1, "a", clock.now + 1.0, clock.now)
    t.hold(2, "b", clock.now + 2.0, clock.now)
    t.hold(3, "c", clock.now + 3.0, clock.now)
    t.hold(4, "d", clock.now + 4.0, clock.now)
    assert t.next_expiry() == clock.now + 1.0
    t.publish(1, clock.now)
    assert t.next_expiry() == clock.now + 2.0
    assert t.drop(2) == 1
    assert t.next_expiry() == clock.now + 3.0
    t.hold(3, "c", clock.now + 5.0, clock.now)  # extended by a retransmission
    assert t.next_expiry() == clock.now + 4.0
    clock.advance(4.5)
    assert list(t.expire(clock.now)) == [(4, "d")]  # the old expiry of c is not c's
    assert t.next_expiry() == clock.now + 0.5


def test_one_timer_at_next_expiry_lets_every_path_go_on_time() -> None:
    clock = Clock()
    t = table(max_entries=100)
    expiries = {k: clock.now + 0.1 * ((k * 7) % 13 + 1) for k in range(40)}
    for k, e in expiries.items():
        t.hold(k, "p", e, clock.now)
    seen: dict[int, float] = {}
    while (due := t.next_expiry()) is not None:
        clock.now = due  # the timer fires
        for key, _ in t.expire(clock.now):
            seen[key] = clock.now
    assert seen == expiries


def test_drop_and_clear_let_go_without_answering() -> None:
    clock = Clock()
    t = table()
    t.hold(1, "a", clock.now + 1.0, clock.now)
    t.hold(1, "b", clock.now + 1.0, clock.now)
    t.hold(2, "a", clock.now + 1.0, clock.now)
    assert t.drop(1) == 2 and t.drop(1) == 0
    assert list(t.publish(1, clock.now)) == []
    t.clear()
    assert len(t) == 0 and t.dropped == 3 and t.next_expiry() is None
    assert list(t.expire(clock.now + 10)) == []


def test_iterating_lists_the_keys_something_waits_for() -> None:
    clock = Clock()
    t = table()
    for k in (3, 1, 2):
        t.hold(k, "a", clock.now + 1.0, clock.now)
    t.publish(2, clock.now)
    assert sorted(t) == [1, 3]


def test_the_expiry_heap_stays_bounded_when_answered_paths_sit_behind_a_long_one() -> None:
    clock = Clock()
    t = table(max_entries=10)
    t.hold(-1, "never", clock.now + 3600.0, clock.now)
    for k in range(10_000):
        t.hold(k, "a", clock.now + 1.0, clock.now)
        assert list(t.publish(k, clock.now)) == ["a"]
        clock.advance(0.001)
    assert len(t._heap) <= 2 * len(t) + 64
    assert t.next_expiry() == 100.0 + 3600.0
    assert (t.held, t.answered) == (10_001, 10_000)
