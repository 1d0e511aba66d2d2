"""The stream's fetch policy on the flow-control core, with a fake clock: a batch not produced
yet is not lost, three later arrivals or an RTO after a later arrival are, and the window grows
one per window of batches, never past the reader's bound."""

from __future__ import annotations

import pytest

from compute.stream.inlet import stream_policy
from icn.dataplane.window import Window


def window(max_window: int = 32) -> Window[int]:
    return Window(stream_policy(max_window, 2000).window_options)


def test_an_unproduced_batch_expires_without_a_loss() -> None:
    w = window()
    w.sent(0, 0.0)
    assert not w.expired(0, 2.0) and w.cwnd == 4 and w.due(2.0).resume == [0]


def test_three_later_arrivals_lose_a_batch() -> None:
    w = window()
    for seq in range(4):
        w.sent(seq, 0.0)
    for seq in (1, 2, 3):
        w.arrived(seq, 0.01)
    assert w.due(0.01).lost == [0] and w.decreases == 1


def test_an_rto_after_a_later_arrival_loses_a_batch() -> None:
    w = window()
    w.sent(0, 0.0)
    w.sent(1, 0.0)
    w.arrived(1, 0.01)
    due = w.due(0.02)
    assert due.lost == [] and due.next_at == pytest.approx(0.05)  # the 50 ms floor
    assert w.due(0.06).lost == [0]


def test_no_slow_start_and_the_readers_bound() -> None:
    w = window(max_window=5)
    w.sent(0, 0.0)
    w.arrived(0, 0.01)
    assert w.cwnd == pytest.approx(4.25)  # one per window, from the first batch
    for seq in range(1, 30):
        w.sent(seq, 0.0)
        w.arrived(seq, 0.01)
    assert 4 < w.cwnd <= 5
    assert window(max_window=1).room() == 1
