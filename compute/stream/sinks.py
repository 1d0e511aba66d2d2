"""Sinks: where records leave a flow, one JSON object ``{"t", "key", "value"}`` per record.

The file sink is exactly once across restarts: a checkpoint saves the file's length and a
restart cuts the file back to it before the replayed records are written again.  stdout and
MQTT cannot take back what they sent: after a restart the records since the last checkpoint
are sent again (at least once; MQTT subscribers can drop repeats by ``t`` and ``key``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from compute.stream.batch import Record
from compute.stream.errors import StreamError
from compute.stream.graph import FileSink, MqttSink, StdoutSink
from compute.stream.sources import parse_broker


def record_json(rec: Record) -> str:
    return json.dumps({"t": rec[0], "key": rec[1], "value": rec[2]}, separators=(",", ":"))


class Sink:
    def __init__(self, counters: Counter[str]) -> None:
        self.counters = counters

    async def open(self) -> None:
        return None

    async def write(self, records: list[Record]) -> None:
        raise NotImplementedError

    def snapshot(self) -> Any:
        return None

    def restore(self, snap: Any) -> None:
        return None

    def sync(self) -> None:
        """Make what was written durable (before a checkpoint records it)."""
        return None

    async def close(self) -> None:
        return None


class ToStdout(Sink):
    async def write(self, records: list[Record]) -> None:
        if records:
            sys.stdout.write("".join(record_json(r) + "\n" for r in records))
            sys.stdout.flush()
            self.counters["records_out"] += len(records)


class ToFile(Sink):
    def __init__(self, op: FileSink, partition: int, counters: Counter[str]) -> None:
        super().__init__(counters)
        self.path = Path(op.path.replace("{partition}", str(partition)))
        self.where = f"{op.name}.path"
        self._file: Any = None
        self._restore_to: int | None = None

    def snapshot(self) -> Any:
        return self._file.tell() if self._file is not None else 0

    def restore(self, snap: Any) -> None:
        self._restore_to = int(snap)

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab")  # noqa: SIM115 (closed in close())
            if self._restore_to is not None:
                self._file.truncate(self._restore_to)  # what came after the checkpoint
            elif self._file.tell():
                self._file.truncate(0)  # a new run starts the file again
            self._file.seek(0, os.SEEK_END)
        except OSError as exc:
            raise StreamError(f"{self.where}: cannot write {self.path}: {exc}") from None

    async def write(self, records: list[Record]) -> None:
        if records:
            self._file.write("".join(record_json(r) + "\n" for r in records).encode())
            self._file.flush()
            self.counters["records_out"] += len(records)

    def sync(self) -> None:
        os.fsync(self._file.fileno())

    async def close(self) -> None:
        if self._file is not None:
            self._file.close()


class ToMqtt(Sink):
    def __init__(self, op: MqttSink, instance: str, counters: Counter[str]) -> None:
        super().__init__(counters)
        from compute.stream.mqtt_io import MqttSink as Client

        host, port = parse_broker(op.broker, f"{op.name}.broker")
        self.topic = op.topic
        self.client = Client(host, port, client_id=op.client_id or f"icn-{instance}", qos=op.qos)

    async def open(self) -> None:
        await self.client.start()

    async def write(self, records: list[Record]) -> None:
        if not records:
            return
        sends = []
        for rec in records:
            topic = (
                self.topic.replace("{key}", str(rec[1])) if "{key}" in self.topic else self.topic
            )
            sends.append(self.client.publish(topic, record_json(rec).encode()))
        await asyncio.gather(*sends)
        self.counters["records_out"] += len(records)

    async def close(self) -> None:
        await self.client.close()


def make_sink(op: Any, instance: str, partition: int, counters: Counter[str]) -> Sink:
    if isinstance(op, StdoutSink):
        return ToStdout(counters)
    if isinstance(op, FileSink):
        return ToFile(op, partition, counters)
    if isinstance(op, MqttSink):
        return ToMqtt(op, instance, counters)
    raise TypeError(f"{op.name} is not a sink")
