"""Result polls held for calls due soon, on a hand-driven clock: which are held, which get an
estimate at once, and when each held one is answered (with the result, or an estimate in
time)."""

from __future__ import annotations

from compute.rmi.polls import HeldPoll, PollHolding
from icn.wire.encode import make_interest
from icn.wire.name import from_uri
from icn.wire.packet import parse_interest

MARGIN = 0.1


def holding(max_held: int = 8) -> PollHolding[str]:
    return PollHolding(margin=MARGIN, max_held=max_held)


def test_a_poll_is_held_only_when_the_result_is_due_within_its_lifetime() -> None:
    polls = holding()
    now = 5.0
    assert not polls.poll("t", "late", eta=0.9, lifetime_ms=1000, now=now)  # 0.9 >= 1.0 - 0.1
    assert polls.poll("t", "soon", eta=0.5, lifetime_ms=1000, now=now)
    assert list(polls.finished("t", now + 0.5)) == ["soon"]


def test_a_held_poll_is_due_margin_before_its_interest_expires() -> None:
    polls = holding()
    polls.poll("a", "p1", eta=0.2, lifetime_ms=1000, now=0.0)
    polls.poll("b", "p2", eta=0.2, lifetime_ms=2000, now=0.0)
    assert polls.next_due() == 1.0 - MARGIN
    assert list(polls.due(0.85)) == []
    assert list(polls.due(0.9)) == [("a", "p1")]
    assert polls.next_due() == 2.0 - MARGIN
    assert list(polls.finished("a", 0.95)) == []  # answered already, with an estimate


def test_a_result_that_beats_the_timer_still_answers_a_poll_in_its_margin() -> None:
    polls = holding()
    polls.poll("t", "p", eta=0.2, lifetime_ms=1000, now=0.0)
    # the call finished at 0.95, after the poll's answer time (0.9) but before the timer ran:
    # the Interest lives until 1.0, so the result goes
    assert list(polls.finished("t", 0.95)) == ["p"]
    assert polls.next_due() is None


def test_too_many_held_polls_get_an_estimate_at_once() -> None:
    polls = holding(max_held=1)
    assert polls.poll("a", "p1", eta=0.1, lifetime_ms=1000, now=0.0)
    assert not polls.poll("b", "p2", eta=0.1, lifetime_ms=1000, now=0.0)
    assert polls.table.refused == 1


def test_a_retransmitted_poll_on_the_same_path_is_answered_once() -> None:
    def reply(wire: bytes) -> None:
        pass

    name = from_uri("/svc/_thunk/abc")
    first = parse_interest(make_interest(name, nonce=b"\x00\x00\x00\x01", lifetime=1000))
    again = parse_interest(make_interest(name, nonce=b"\x00\x00\x00\x02", lifetime=1000))
    polls: PollHolding[HeldPoll] = PollHolding(margin=MARGIN)
    assert polls.poll("t", HeldPoll(first.name, reply, first), 0.3, 1000, now=0.0)
    assert polls.poll("t", HeldPoll(again.name, reply, again), 0.3, 1000, now=0.2)
    answered = polls.finished("t", 0.3)
    assert len(answered) == 1 and answered[0].iv is first
    assert polls.table.duplicates == 1
