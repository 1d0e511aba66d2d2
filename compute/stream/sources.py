"""Sources: where records enter a flow.  Each ``step()`` returns one step's records, the
watermark after them and whether the input has ended.

The generator and the file source are deterministic: a restart from a checkpoint position
produces the same batches again.  The MQTT source is not (a broker delivers a message once
it is acknowledged), so its batches go to a :class:`~compute.stream.sourcelog.SourceLog`
before the broker gets its acknowledgements.
"""

from __future__ import annotations

import asyncio
import csv
import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from compute.stream.batch import END_OF_TIME, NO_WATERMARK, Output, Record
from compute.stream.columns import Columns, column
from compute.stream.errors import StreamError
from compute.stream.graph import FileSource, GeneratorSource, MqttSource
from compute.stream.operators import load_fn

log = logging.getLogger(__name__)
Step = tuple[Output, int, bool]


def parse_broker(broker: str, where: str) -> tuple[str, int]:
    """``host:port`` or ``mqtt://host:port`` (port 1883 when left out)."""
    rest = broker.removeprefix("mqtt://")
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "1883")
    try:
        number = int(port)
        if not 0 < number < 65536 or not host:
            raise ValueError
    except ValueError:
        raise StreamError(f"{where}: {broker!r} is not host:port, e.g. 127.0.0.1:1883") from None
    return host, number


class Source:
    """Base: ``position`` is what a checkpoint saves; ``restore`` resumes from it."""

    logged = False  # True: batches go to a SourceLog (input that cannot be read twice)

    def __init__(self, counters: Counter[str]) -> None:
        self.counters = counters
        self.linger = 0.005  # seconds a batch may wait to fill (the graph's settings.linger)

    async def open(self) -> None:
        return None

    async def step(self) -> Step:
        raise NotImplementedError

    def snapshot(self) -> Any:
        return None

    def restore(self, snap: Any) -> None:
        return None

    def acknowledge(self) -> None:
        """The records of the last step are safe in the log: let the input forget them."""
        return None

    async def close(self) -> None:
        return None


class Generated(Source):
    """Partition ``p`` of ``n`` produces records ``i = p, p + n, p + 2n, ...``."""

    def __init__(self, op: GeneratorSource, p: int, n: int, counters: Counter[str]) -> None:
        super().__init__(counters)
        self.op = op
        self.p, self.n = p, n
        self.fn = load_fn(op.fn, f"{op.name}.fn") if op.fn else None
        self.local = 0  # records of this partition produced so far
        total = op.count
        self.mine = None if total is None else max(0, (total - p + n - 1) // n)
        self.rate = None if op.rate is None else op.rate / n
        self._t0: float | None = None
        self._first = 0

    def snapshot(self) -> Any:
        return self.local

    def restore(self, snap: Any) -> None:
        self.local = int(snap)

    def value(self, i: int) -> Any:
        if self.fn is not None:
            return self.fn(i)
        # deterministic, cheap, spread over 0..99.9
        return {"sensor": f"s{i % self.op.keys}", "value": ((i * 2654435761) % 1000) / 10.0}

    async def step(self) -> Step:
        op = self.op
        count = op.batch if self.mine is None else min(op.batch, self.mine - self.local)
        if self.rate is not None:
            now = time.monotonic()
            if self._t0 is None:
                self._t0, self._first = now, self.local
            due = self._t0 + (self.local - self._first) / self.rate
            if due > now:
                await asyncio.sleep(due - now)
            count = min(count, max(1, int(self.rate * self.linger)))  # a batch per linger
        eps, start, key_field = op.events_per_second, op.start, op.key_field
        g, n = self.p + self.local * self.n, self.n
        stop = g + count * n
        values = list(map(self.fn or self.value, range(g, stop, n)))
        if g >= 0 and stop * 1000 < 2**53:
            # as int(i * 1000 / eps) below: int64 * 1000 is exact, as is its float64 here
            ts = (np.arange(g, stop, n, dtype=np.int64) * 1000 / eps).astype(np.int64) + start
        else:
            ts = np.array([start + int(i * 1000 / eps) for i in range(g, stop, n)], np.int64)
        key = None
        if key_field:
            keys = [v.get(key_field) if isinstance(v, dict) else None for v in values]
            key = None if keys.count(None) == len(keys) else column(keys)
        cols = Columns.from_values(ts.reshape(count), key, values)
        self.local += count
        end = self.mine is not None and self.local >= self.mine
        if end:
            return cols, END_OF_TIME, True
        last = start + int((stop - n) * 1000 / eps) if self.local else NO_WATERMARK
        return cols, last - round(op.max_delay * 1000), False


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class FromFile(Source):
    """JSON lines or CSV with a header; line ``i`` (from 0) has event time ``time_field`` or
    ``i`` ms."""

    def __init__(self, op: FileSource, counters: Counter[str]) -> None:
        super().__init__(counters)
        self.op = op
        self.line = 0
        self.max_t = NO_WATERMARK
        self._rows: Any = None
        self._file: Any = None

    def snapshot(self) -> Any:
        return [self.line, self.max_t]

    def restore(self, snap: Any) -> None:
        self.line, self.max_t = int(snap[0]), int(snap[1])

    async def open(self) -> None:
        try:
            self._file = open(Path(self.op.path), newline="")  # noqa: SIM115 (closed in close())
        except OSError as exc:
            raise StreamError(f"{self.op.name}.path: cannot read {self.op.path}: {exc}") from None
        if self.op.format == "csv":
            self._rows = csv.DictReader(self._file)
        else:
            self._rows = iter(self._file)
        for _ in range(self.line):
            if next(self._rows, None) is None:
                break

    async def step(self) -> Step:
        op = self.op
        records: list[Record] = []
        end = False
        limit = op.batch if op.rate is None else min(op.batch, max(1, int(op.rate * self.linger)))
        while len(records) < limit:
            row = next(self._rows, None)
            if row is None:
                end = True
                break
            i = self.line
            self.line += 1
            try:
                if op.format == "csv":
                    value: Any = {k: _number(v) for k, v in row.items()}
                else:
                    if not row.strip():
                        continue
                    value = json.loads(row)
                t = int(value[op.time_field]) if op.time_field else i
                key = value.get(op.key_field) if op.key_field else None
            except Exception as exc:
                self.counters["bad_lines"] += 1
                log.warning("%s: line %d skipped: %r", op.name, i + 1, exc)
                continue
            self.max_t = max(self.max_t, t)
            records.append([t, key, value])
        if op.rate is not None:
            await asyncio.sleep(len(records) / op.rate)
        if end:
            return records, END_OF_TIME, True
        wm = self.max_t - round(op.max_delay * 1000) if self.max_t > NO_WATERMARK else self.max_t
        return records, wm, False

    async def close(self) -> None:
        if self._file is not None:
            self._file.close()


class FromMqtt(Source):
    """Messages of a topic, QoS 1 by default, acknowledged to the broker only once their batch
    is in the log.  Event time: ``time_field`` of the JSON payload (ms), else the arrival time;
    the watermark trails the newest event time by ``max_delay``, and follows the clock after
    ``idle_watermark`` without messages."""

    logged = True

    def __init__(self, op: MqttSource, instance: str, counters: Counter[str]) -> None:
        super().__init__(counters)
        from compute.stream.mqtt_io import MqttSource as Client

        self.op = op
        host, port = parse_broker(op.broker, f"{op.name}.broker")
        self.client = Client(
            host, port, op.topic, client_id=op.client_id or f"icn-{instance}", qos=op.qos
        )
        self.max_t = NO_WATERMARK
        self.idle_since = time.monotonic()
        self._unacked: list[Any] = []

    def snapshot(self) -> Any:
        return self.max_t

    def restore(self, snap: Any) -> None:
        self.max_t = int(snap)

    async def open(self) -> None:
        await self.client.start()

    async def step(self) -> Step:
        op = self.op
        deadline = time.monotonic() + (self.linger if op.linger is None else op.linger)
        messages: list[Any] = []
        while len(messages) < op.batch:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            messages += await self.client.get(op.batch - len(messages), left)
        records: list[Record] = []
        now_ms = int(time.time() * 1000)
        for msg in messages:
            try:
                value: Any = json.loads(msg.payload) if op.format == "json" else msg.payload
                if op.time_field and isinstance(value, dict):
                    t = int(value[op.time_field])
                else:
                    t = now_ms
                key = value.get(op.key_field) if op.key_field and isinstance(value, dict) else None
            except Exception as exc:
                self.counters["bad_messages"] += 1
                log.warning("%s: message on %s skipped: %r", op.name, msg.topic, exc)
                continue
            self.max_t = max(self.max_t, t)
            records.append([t, key, value])
        self._unacked = messages
        mono = time.monotonic()
        if messages:
            self.idle_since = mono
        delay = round(op.max_delay * 1000)
        wm = self.max_t - delay if self.max_t > NO_WATERMARK else NO_WATERMARK
        if op.idle_watermark is not None and mono - self.idle_since >= op.idle_watermark:
            wm = max(wm, now_ms - delay - round(op.idle_watermark * 1000))
        return records, wm, False

    def acknowledge(self) -> None:
        if self._unacked:
            self.client.ack(self._unacked)
            self._unacked = []

    async def close(self) -> None:
        await self.client.close()


def make_source(
    op: Any, instance: str, p: int, n: int, counters: Counter[str], linger: float
) -> Source:
    """Partition ``p`` of ``n`` of source ``op``; ``linger``: the graph's settings.linger."""
    source: Source
    if isinstance(op, GeneratorSource):
        source = Generated(op, p, n, counters)
    elif isinstance(op, FileSource):
        source = FromFile(op, counters)
    elif isinstance(op, MqttSource):
        source = FromMqtt(op, instance, counters)
    else:
        raise TypeError(f"{op.name} is not a source")
    source.linger = linger
    return source
