"""Result polls that arrive before their result (free of I/O; time passed in).

A poll for a call still running is answered at once with a new estimate when the result is not
due within the poll Interest's lifetime; otherwise it is held, and answered with the result
when the call finishes, or with a new estimate ``margin`` seconds before the Interest expires
(never silence).  The server arms one timer at :meth:`PollHolding.next_due` for all of them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from icn.dataplane.handlers import Reply
from icn.dataplane.holding import HoldingTable
from icn.wire.packet import InterestView

P = TypeVar("P", bound=Hashable)
MAX_HELD_POLLS = 65536


@dataclass(frozen=True, slots=True)
class HeldPoll:
    """A poll held for its result.  Two with the same name on the same reply path are one:
    a retransmission shares its PIT entry upstream, which takes one answer."""

    name: bytes
    reply: Reply
    iv: InterestView = field(compare=False)


class PollHolding(Generic[P]):
    """The polls held, by call token."""

    def __init__(self, *, margin: float, max_held: int = MAX_HELD_POLLS) -> None:
        self.margin = margin
        self.table: HoldingTable[str, P] = HoldingTable(max_held)

    def poll(self, token: str, poll: P, eta: float, lifetime_ms: int, now: float) -> bool:
        """A poll for a call due in ``eta`` seconds: True if held, False if it is to be
        answered now with the estimate (not due in time, or too many held)."""
        window = lifetime_ms / 1000.0 - self.margin
        if eta >= window:
            return False
        return self.table.hold(token, poll, now + window, now)

    def finished(self, token: str, now: float) -> Sequence[P]:
        """The call finished: the polls to answer with its result.  One past its answer time
        that the timer has not reached yet still lives ``margin`` seconds: the result is a
        better answer for it than the estimate it was due."""
        return self.table.publish(token, now - self.margin)

    def due(self, now: float) -> Sequence[tuple[str, P]]:
        """The polls to answer now with a new estimate, by token."""
        return self.table.expire(now)

    def next_due(self) -> float | None:
        return self.table.next_expiry()

    def clear(self) -> None:
        self.table.clear()
