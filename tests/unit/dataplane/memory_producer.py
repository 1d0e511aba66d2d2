"""A producer at the other end of an in-memory link: it sees every Interest an endpoint sends
and a test's ``answer(interest) -> reply | None`` decides (Data, Nack, congestion-marked Data,
or nothing); ``hold`` keeps Interests until the test releases them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from icn.dataplane.endpoint import Endpoint
from icn.wire.encode import make_data
from icn.wire.lp import encode_lp
from icn.wire.packet import InterestView, parse_interest

Answer = Callable[[InterestView], bytes | None]


def data(iv: InterestView, content: bytes = b"x") -> bytes:
    return make_data(iv.name, content)


def nack(iv: InterestView, reason: int = 150) -> bytes:
    return encode_lp(iv.wire, nack_reason=reason)


def marked(iv: InterestView) -> bytes:
    return encode_lp(data(iv), congestion_mark=1)


class MemoryProducer:
    """The PacketPort an :class:`Endpoint` writes to."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.seen: list[InterestView] = []
        self.held: list[InterestView] = []
        self.hold = False
        self._receive: Callable[[bytes], None] | None = None
        self._on_close: Callable[[], None] | None = None

    def bind(self, receive: Callable[[bytes], None], on_close: Callable[[], None]) -> None:
        self._receive, self._on_close = receive, on_close

    def send(self, wire: bytes) -> None:
        iv = parse_interest(wire)
        self.seen.append(iv)
        if self.hold:
            self.held.append(iv)
        else:
            self._reply(iv)

    def release(self) -> None:
        held, self.held = self.held, []
        for iv in held:
            self._reply(iv)

    def _reply(self, iv: InterestView) -> None:
        reply = self.answer(iv)
        if reply is not None and self._receive is not None:
            asyncio.get_running_loop().call_soon(self._receive, reply)

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


def endpoint(answer: Answer) -> tuple[Endpoint, MemoryProducer]:
    producer = MemoryProducer(answer)
    return Endpoint.over_port(producer), producer
