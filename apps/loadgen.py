"""Lean load generator: a UDP consumer with many Interests in flight and a UDP producer.

Both use the lean codec (icn.wire.packet readers, icn.wire.encode templates), so they cost a few
microseconds per packet and measure the network in between rather than themselves.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import cast

from icn.dataplane.window import Window, WindowOptions
from icn.errors import DecodeError
from icn.rtt import RttOptions
from icn.wire.encode import DataTemplate, make_interest
from icn.wire.lp import encode_lp, parse_lp
from icn.wire.name import from_uri, generic, to_uri
from icn.wire.packet import parse_data, parse_interest
from icn.wire.signer import DIGEST_SHA256


@dataclass
class FetchResult:
    """What a consumer run measured."""

    requested: int = 0
    received: int = 0
    failed: int = 0
    retransmissions: int = 0
    nacks: int = 0
    seconds: float = 0.0
    rtt_ms: list[float] = field(default_factory=list, repr=False)
    # the names that were not fetched, for diagnosis (bounded)
    missing: list[str] = field(default_factory=list, repr=False)

    @property
    def rate(self) -> float:
        return self.received / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float:
        if not self.rtt_ms:
            return float("nan")
        s = sorted(self.rtt_ms)
        return s[min(len(s) - 1, int(q / 100 * len(s)))]

    def summary(self) -> dict[str, float | int]:
        d = {k: v for k, v in asdict(self).items() if k not in ("rtt_ms", "missing")}
        d["rate"] = round(self.rate, 1)
        d["rtt_p50_ms"] = round(self.percentile(50), 3)
        d["rtt_p99_ms"] = round(self.percentile(99), 3)
        return d


def object_names(prefix: str, count: int, start: int = 0) -> list[bytes]:
    """``/prefix/<i>`` for i in [start, start+count)."""
    base = from_uri(prefix)
    return [base + generic(str(i)) for i in range(start, start + count)]


class _ConsumerProtocol(asyncio.DatagramProtocol):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.consumer._on_packet(data)

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP port unreachable: keep going
        self.consumer.socket_errors += 1


class Consumer:
    """Fetch named objects over UDP with a window of Interests in flight.

    Lost Interests or Data are retransmitted with a fresh Nonce after ``rto`` seconds, at most
    ``max_retries`` times each; the run ends when every name is fetched or has failed.

    A load generator offers the load it is told to, so its window and its RTO are fixed (no
    back-off, no shrinking on loss, congestion marks not read), and it keeps its own socket and
    the lean codec rather than an Endpoint and the fetcher (a future and a timer per Interest
    would make it measure itself).  Its decisions are still the flow-control core's: a
    :class:`~icn.dataplane.window.Window` configured to stay fixed says what is in flight, what
    is lost and when to look again.
    """

    def __init__(
        self,
        remote: tuple[str, int],
        *,
        window: int = 64,
        lifetime_ms: int = 1000,
        rto: float = 0.25,
        max_retries: int = 10,
        must_be_fresh: bool = False,
    ) -> None:
        self.remote = remote
        self.window = window
        self.lifetime_ms = lifetime_ms
        self.rto = rto
        self.max_retries = max_retries
        self.must_be_fresh = must_be_fresh
        self.socket_errors = 0
        self._transport: asyncio.DatagramTransport | None = None
        self._flight: Window[bytes] = self._fixed_window()
        self._queue: list[bytes] = []
        self._next = 0
        self._result = FetchResult()
        self._done: asyncio.Future[None] | None = None

    def _fixed_window(self) -> Window[bytes]:
        size = float(max(1, self.window))
        fixed_rto = RttOptions(
            initial_rto=self.rto, min_rto=self.rto, max_rto=self.rto, backoff=1.0
        )
        return Window(
            WindowOptions(
                initial_window=size,
                max_window=size,
                reorder=0,
                loss_decreases=False,
                rtt=fixed_rto,
            )
        )

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _ConsumerProtocol(self), remote_addr=self.remote
        )
        self._transport = transport

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    async def fetch(self, names: Sequence[bytes], timeout: float = 120.0) -> FetchResult:
        """Fetch every name once; bounded by ``timeout`` seconds overall."""
        if self._transport is None:
            await self.open()
        loop = asyncio.get_running_loop()
        self._queue = list(names)
        self._next = 0
        self._flight = self._fixed_window()
        self._result = res = FetchResult(requested=len(names))
        self._done = loop.create_future()
        start = time.perf_counter()
        while self._next < len(names) and self._flight.room():
            self._send_next()
        if not names:
            self._done.set_result(None)
        checker = asyncio.ensure_future(self._retransmit_loop())
        try:
            await asyncio.wait_for(asyncio.shield(self._done), timeout)
        except TimeoutError:
            lost = self._flight.in_flight_keys()
            res.failed += len(lost) + len(self._queue) - self._next
            self._note_missing(lost + self._queue[self._next :])
        finally:
            checker.cancel()
        res.seconds = time.perf_counter() - start
        return res

    def _note_missing(self, names: list[bytes]) -> None:
        room = 20 - len(self._result.missing)
        self._result.missing.extend(to_uri(n) for n in names[: max(room, 0)])

    def _send(self, name: bytes) -> None:
        assert self._transport is not None
        self._transport.sendto(
            make_interest(
                name,
                nonce=os.urandom(4),
                lifetime=self.lifetime_ms,
                must_be_fresh=self.must_be_fresh,
            )
        )

    def _send_next(self) -> None:
        if self._next >= len(self._queue):
            return
        name = self._queue[self._next]
        self._next += 1
        self._flight.sent(name, time.perf_counter())
        self._send(name)

    def _finish_one(self) -> None:
        if self._next < len(self._queue):
            self._send_next()
        elif not self._flight.in_flight and self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _on_packet(self, wire: bytes) -> None:
        try:
            if wire[:1] == b"\x64":
                lp = parse_lp(wire)
                if lp.fragment is None:
                    return
                if lp.nack_reason is not None:
                    self._result.nacks += 1
                    return  # asked again once its RTO passes
                wire = lp.fragment
            if wire[:1] != b"\x06":
                return
            name = parse_data(wire).name
        except DecodeError:
            return
        rtt = self._flight.arrived(name, time.perf_counter())
        if rtt is None:
            return  # duplicate or late Data
        self._result.received += 1
        self._result.rtt_ms.append(rtt * 1000)
        self._finish_one()

    async def _retransmit_loop(self) -> None:
        flight = self._flight
        while True:
            now = time.perf_counter()
            due = flight.due(now)
            for name in due.lost:
                if flight.tries(name) > self.max_retries:
                    flight.forget(name)
                    self._result.failed += 1
                    self._note_missing([name])
                    self._finish_one()
                    continue
                flight.sent(name, now)
                self._result.retransmissions += 1
                self._send(name)
            await asyncio.sleep(max(0.001, (due.next_at or now + self.rto) - now))


class Producer(asyncio.DatagramProtocol):
    """Answer every Interest under ``prefix`` with ``payload_size`` bytes of content."""

    def __init__(
        self,
        prefix: str = "/",
        payload_size: int = 1024,
        freshness_ms: int | None = 10_000,
        sign: bool = True,
    ) -> None:
        self.prefix = from_uri(prefix)
        self.payload = os.urandom(payload_size)
        self.template = DataTemplate(freshness=freshness_ms, signer=DIGEST_SHA256 if sign else None)
        self.served = 0
        self.ignored = 0
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's UDP transport does not subclass asyncio.DatagramTransport
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        token = None
        try:
            if data[:1] == b"\x64":
                lp = parse_lp(data)
                if lp.fragment is None or lp.nack_reason is not None:
                    self.ignored += 1
                    return
                token, data = lp.pit_token, lp.fragment
            if data[:1] != b"\x05":
                self.ignored += 1
                return
            name = parse_interest(data).name
        except DecodeError:
            self.ignored += 1
            return
        if not name.startswith(self.prefix):
            self.ignored += 1
            return
        wire = self.template.build(name, self.payload)
        if token is not None:
            wire = encode_lp(wire, pit_token=token)
        assert self.transport is not None
        self.transport.sendto(wire, addr)
        self.served += 1


async def start_producer(
    host: str, port: int, **kwargs: object
) -> tuple[asyncio.DatagramTransport, Producer]:
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(
        lambda: Producer(**kwargs),  # type: ignore[arg-type]
        local_addr=(host, port),
    )
    return transport, proto


__all__ = ["Consumer", "FetchResult", "Producer", "object_names", "start_producer"]
