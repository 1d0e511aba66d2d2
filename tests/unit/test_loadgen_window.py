"""The load generator's window stays what it was told: fixed size, fixed RTO, no back-off."""

from __future__ import annotations

import pytest

from apps.loadgen import Consumer


def test_the_offered_load_does_not_adapt() -> None:
    w = Consumer(("127.0.0.1", 9), window=8, rto=0.25)._fixed_window()
    for i in range(8):
        w.sent(bytes([i]), 0.0)
    assert w.room() == 0
    due = w.due(0.25)
    assert len(due.lost) == 8 and w.cwnd == 8 and w.rto == 0.25  # all lost, nothing shrank
    w.sent(b"\x00", 0.25)
    w.arrived(b"\x00", 0.26)
    assert w.rto == 0.25 and w.room() == 1
    assert w.sent(b"\x09", 1.0) == pytest.approx(1.25)
