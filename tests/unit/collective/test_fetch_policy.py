"""The collective's fetch policy, on the flow-control core with a fake clock: chunks become
ready in any order and are held until then, so neither reordering nor waiting is a loss."""

from __future__ import annotations

from compute.collective.fetch import chunk_policy
from icn.dataplane.window import Window


def test_chunks_ready_out_of_order_are_not_lost() -> None:
    w: Window[int] = Window(chunk_policy(1000, 10.0, 8, False).window_options)
    for i in range(8):
        w.sent(i, 0.0)
    for i in range(1, 8):
        w.arrived(i, 0.5)  # chunk 0 is still being summed
    due = w.due(5.0)
    assert due.lost == [] and due.next_at is None and w.decreases == 0


def test_an_expiry_after_a_later_chunk_came_is_a_loss() -> None:
    w: Window[int] = Window(chunk_policy(1000, 10.0, 8, False).window_options)
    w.sent(0, 0.0)
    assert not w.expired(0, 1.0)  # nothing later came: held, not lost
    w.sent(0, 1.0)
    w.sent(1, 1.0)
    w.arrived(1, 1.1)
    assert w.expired(0, 2.0) and w.losses == 1


def test_the_window_is_the_callers_and_does_not_grow_past_it() -> None:
    policy = chunk_policy(1000, 10.0, 4, True)
    assert policy.nack_gives_up and policy.max_retries is None and policy.deadline == 10.0
    w: Window[int] = Window(policy.window_options)
    assert w.room() == 4
    for i in range(100):
        w.sent(i, 0.0)
        w.arrived(i, 0.1)
    assert w.cwnd == 4


def test_a_lost_chunk_is_asked_again_without_shrinking_the_window() -> None:
    w: Window[int] = Window(chunk_policy(1000, 10.0, 8, False).window_options)
    w.sent(0, 0.0)
    w.sent(1, 0.0)
    w.arrived(1, 0.1)
    assert w.expired(0, 1.0) and w.cwnd == 8
