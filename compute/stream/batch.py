"""A batch: the records one operator instance produced in one step, its watermark, and
whether the stream ends with it.  On the wire: msgpack ``[watermark, end, [[t, key, value],
...]]``.  A step's output larger than a packet is cut into several batches; only the last one
carries the step's new watermark, so no reader advances event time before it has every record
the watermark covers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from compute.stream.errors import StreamError

NO_WATERMARK = -(2**63)  # event time has not started
END_OF_TIME = 2**63 - 1  # the watermark of an ended stream
Record = list[Any]  # [t, key, value]; a list, as msgpack gives it back


@dataclass
class Batch:
    watermark: int
    end: bool
    records: list[Record]


def decode_batch(content: bytes) -> Batch:
    """A Batch, or StreamError for content that is not one (a bad producer, not the network:
    Data are signed and matched by name)."""
    try:
        wm, end, records = msgpack.unpackb(content, strict_map_key=False)
        if not isinstance(wm, int) or not isinstance(records, list):
            raise TypeError("bad field types")
    except Exception as exc:
        raise StreamError(f"a batch that does not decode ({exc})") from None
    return Batch(wm, bool(end), records)


def encode_batches(
    records: list[Record], watermark: int, end: bool, *, limit: int, previous_watermark: int
) -> list[bytes]:
    """``records`` packed into batches of at most ``limit`` bytes (at least one batch, even
    empty: it carries the watermark).  A single record larger than ``limit`` raises
    StreamError naming it."""
    whole = msgpack.packb([watermark, end, records])
    if len(whole) <= limit:
        return [whole]
    if len(records) <= 1:
        shown = repr(records[0])[:120] if records else "(none)"
        raise StreamError(f"a record of {len(whole)} bytes exceeds batch_bytes {limit}: {shown}")
    parts = -(-len(whole) // limit) + 1
    step = -(-len(records) // parts)
    out: list[bytes] = []
    for i in range(0, len(records), step):
        last = i + step >= len(records)
        out += encode_batches(
            records[i : i + step],
            watermark if last else previous_watermark,
            end and last,
            limit=limit,
            previous_watermark=previous_watermark,
        )
    return out
