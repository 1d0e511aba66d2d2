"""The congestion window and loss detection, driven with a fake clock (plain floats)."""

from __future__ import annotations

import pytest

from icn.dataplane.window import Window, WindowOptions
from icn.rtt import RttOptions


def fill(w: Window[int], keys: range, now: float) -> None:
    for k in keys:
        w.sent(k, now)


def test_room_is_the_window_less_what_is_in_flight() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=4))
    assert w.room() == 4
    fill(w, range(3), 0.0)
    assert w.room() == 1 and w.in_flight == 3 and 1 in w
    w.sent(0, 0.1)
    assert w.in_flight_keys() == [1, 2, 0]  # in send order


def test_slow_start_then_additive_increase_capped() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=2, initial_ssthresh=4, max_window=5))
    fill(w, range(10), 0.0)
    w.arrived(0, 0.1)
    w.arrived(1, 0.1)
    assert w.cwnd == 4  # +1 per arrival below ssthresh
    w.arrived(2, 0.1)
    assert w.cwnd == pytest.approx(4.25)  # +1/cwnd above it
    for k in range(3, 10):
        w.arrived(k, 0.1)
    assert w.cwnd <= 5


def test_karn_no_sample_from_a_retransmitted_key() -> None:
    w: Window[int] = Window()
    w.sent(1, 0.0)
    w.sent(1, 1.0)  # retransmitted
    w.arrived(1, 1.05)
    assert w.rtt.srtt is None
    w.sent(2, 2.0)
    assert w.arrived(2, 2.1) == pytest.approx(0.1)
    assert w.rtt.srtt == pytest.approx(0.1)


def test_an_unknown_arrival_changes_nothing() -> None:
    w: Window[int] = Window()
    assert w.arrived(7, 1.0) is None
    assert w.cwnd == 4 and w.rtt.samples == 0


def test_reordering_k_later_arrivals_mark_a_key_lost() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=8, reorder=3, rto_loss=False))
    fill(w, range(5), 0.0)
    w.arrived(1, 0.01)
    w.arrived(2, 0.01)
    assert w.due(0.01).lost == []
    w.arrived(3, 0.01)
    due = w.due(0.01)
    assert due.lost == [0] and w.losses == 1 and w.decreases == 1
    assert w.cwnd == 5.5  # slow start took it to 11; halved


def test_an_arrival_counts_only_for_keys_sent_before_it() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=8, reorder=1, rto_loss=False))
    w.sent(0, 0.0)
    w.sent(1, 0.0)
    w.sent(0, 0.5)  # 0 asked again: now sent after 1
    w.arrived(1, 0.6)
    assert w.due(0.6).lost == []


def test_rto_timeout_is_a_loss_and_backs_off_the_rto() -> None:
    w: Window[int] = Window(WindowOptions(rtt=RttOptions(initial_rto=1.0)))
    w.sent(0, 0.0)
    due = w.due(0.5)
    assert due.lost == [] and due.next_at == pytest.approx(1.0)
    due = w.due(1.0)
    assert due.lost == [0] and w.rto == 2.0 and w.decreases == 1
    assert w.sent(0, 1.0) == pytest.approx(3.0)  # resent: lost at 3.0 unless it comes
    assert w.due(1.5).next_at == pytest.approx(3.0)


def test_at_most_one_decrease_per_round_trip() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=16, max_window=16))
    fill(w, range(4), 0.0)
    w.arrived(0, 0.1)  # srtt 0.1
    w.cwnd = 16
    w.expired(1, 1.0)
    w.expired(2, 1.05)
    assert w.cwnd == 8 and w.decreases == 1
    w.expired(3, 1.2)  # a round trip later: a new congestion event
    assert w.cwnd == 4 and w.decreases == 2


def test_the_window_never_goes_below_its_minimum() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=1, min_window=1))
    w.sent(0, 0.0)
    w.expired(0, 5.0)
    assert w.cwnd == 1


def test_congestion_mark_decreases_instead_of_growing() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=8))
    fill(w, range(2), 0.0)
    w.arrived(0, 0.1, marked=True)
    assert w.cwnd == 4 and w.decreases == 1 and w.rtt.samples == 1


def test_stream_policy_an_expiry_before_any_later_arrival_is_not_a_loss() -> None:
    w: Window[int] = Window(WindowOptions(loss_needs_later_arrival=True))
    fill(w, range(2), 0.0)
    assert not w.expired(0, 2.0)  # nothing later came: not made yet
    assert w.cwnd == 4 and w.due(2.0).resume == [0]
    w.sent(0, 2.0)
    w.arrived(1, 2.1)
    assert not w.expired(0, 4.0)  # 0 was re-sent after 1: 1's arrival says nothing
    w.sent(0, 4.0)
    w.sent(2, 4.0)
    w.arrived(2, 4.1)
    assert w.expired(0, 6.0) and w.cwnd == 3  # 6 after two arrivals, halved


def test_stream_policy_rto_needs_a_later_arrival_too() -> None:
    w: Window[int] = Window(
        WindowOptions(loss_needs_later_arrival=True, rtt=RttOptions(initial_rto=1.0))
    )
    assert w.sent(0, 0.0) is None
    w.sent(1, 0.0)
    due = w.due(5.0)
    assert due.lost == [] and due.next_at is None  # waits for an arrival or its expiry
    w.sent(2, 5.0)
    w.arrived(2, 5.1)  # 0.1 s round trip: RTO 0.3 s, long passed for 0
    assert w.due(5.1).lost == [0, 1]


def test_without_rto_loss_only_expiry_or_reordering_loses() -> None:
    w: Window[int] = Window(WindowOptions(rto_loss=False))
    w.sent(0, 0.0)
    assert w.due(100.0) == ([], [], None)
    assert w.expired(0, 100.0) and w.due(100.0).resume == [0]


def test_nack_pause_doubles_up_to_a_cap_and_resets_on_success() -> None:
    w: Window[int] = Window(WindowOptions(nack_pause=0.1, max_nack_pause=0.3, rto_loss=False))
    fill(w, range(3), 0.0)
    assert w.nacked(0, 1.0) == pytest.approx(1.1)
    due = w.due(1.05)
    assert due.resume == [] and due.next_at == pytest.approx(1.1)
    assert w.due(1.1).resume == [0]
    assert w.room() == 1  # a paused key keeps its slot
    w.sent(0, 1.1)
    assert w.nacked(0, 1.2) == pytest.approx(1.4)
    w.sent(0, 1.4)
    assert w.nacked(0, 1.5) == pytest.approx(1.8)  # capped at 0.3
    w.sent(0, 1.8)
    assert w.nacked(0, 2.0) == pytest.approx(2.3)
    assert w.nacked(2, 2.0) == pytest.approx(2.1)  # each key its own pauses
    w.sent(0, 2.3)
    w.arrived(1, 2.35)
    assert w.nacked(0, 2.4) == pytest.approx(2.5)  # the arrival started them again
    assert w.cwnd > 4  # a plain Nack is not congestion


def test_congestion_nack_decreases() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=8))
    w.sent(0, 0.0)
    w.nacked(0, 0.1, congestion=True)
    assert w.cwnd == 4


def test_forget_frees_the_slot() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=2))
    fill(w, range(2), 0.0)
    w.forget(0)
    assert w.room() == 1 and 0 not in w and w.tries(0) == 0 and w.tries(1) == 1


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        WindowOptions(initial_window=8, max_window=4)
    with pytest.raises(ValueError):
        WindowOptions(decrease=1.0)


def test_losses_may_be_told_not_to_shrink_the_window_but_marks_still_do() -> None:
    w: Window[int] = Window(WindowOptions(initial_window=8, loss_decreases=False))
    fill(w, range(3), 0.0)
    assert w.expired(0, 5.0) and w.losses == 1 and w.cwnd == 8
    assert w.due(6.0).lost == [1, 2] and w.cwnd == 8
    w.arrived(1, 6.0, marked=True)
    assert w.cwnd == 4
