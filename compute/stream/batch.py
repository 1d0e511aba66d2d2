"""A batch: the records one operator instance produced in one step, its watermark, and
whether the stream ends with it.  On the wire: columns (:mod:`compute.stream.columns`).  A
step's output larger than a packet is cut into several batches; only the last one carries the
step's new watermark, so no reader advances event time before it has every record the
watermark covers."""

from __future__ import annotations

from typing import Any

from compute.stream.columns import Columns, Record, decode_columns, encode_columns

__all__ = [
    "END_OF_TIME",
    "NO_WATERMARK",
    "Batch",
    "Output",
    "Record",
    "decode_batch",
    "encode_batches",
]
from compute.stream.errors import StreamError

NO_WATERMARK = -(2**63)  # event time has not started
END_OF_TIME = 2**63 - 1  # the watermark of an ended stream
Output = list[Record] | Columns  # what a step produces: records, or the same as columns


class Batch:
    """Records as a list or as columns; each form made from the other when first asked for
    (a vectorized operator reads columns, a per-record one records)."""

    __slots__ = ("_columns", "_records", "end", "watermark")

    def __init__(
        self,
        watermark: int,
        end: bool,
        records: list[Record] | None = None,
        columns: Columns | None = None,
    ) -> None:
        self.watermark = watermark
        self.end = end
        self._records = records if records is not None or columns is not None else []
        self._columns = columns

    @property
    def records(self) -> list[Record]:
        if self._records is None:
            assert self._columns is not None
            self._records = self._columns.records()
        return self._records

    @property
    def columns(self) -> Columns:
        if self._columns is None:
            self._columns = Columns.from_records(self.records)
        return self._columns

    def __len__(self) -> int:
        return len(self._columns) if self._columns is not None else len(self.records)

    def __repr__(self) -> str:
        return f"Batch(watermark={self.watermark}, end={self.end}, rows={len(self)})"


def decode_batch(content: Any) -> Batch:
    """A Batch, or StreamError for content that is not one (a bad producer, not the network:
    Data are signed and matched by name)."""
    wm, end, cols = decode_columns(content)
    return Batch(wm, end, columns=cols)


def output_records(out: Output) -> list[Record]:
    return out.records() if isinstance(out, Columns) else out


def encode_batches(
    out: Output, watermark: int, end: bool, *, limit: int, previous_watermark: int
) -> list[bytes]:
    """``out`` packed into batches of at most ``limit`` bytes (at least one batch, even
    empty: it carries the watermark).  A single record larger than ``limit`` raises
    StreamError naming it."""
    cols = out if isinstance(out, Columns) else Columns.from_records(out)
    whole = encode_columns(cols, watermark, end)
    if len(whole) <= limit:
        return [whole]
    n = len(cols)
    if n <= 1:
        shown = repr(cols.records()[0])[:120] if n else "(none)"
        raise StreamError(f"a record of {len(whole)} bytes exceeds batch_bytes {limit}: {shown}")
    parts = -(-len(whole) // limit) + 1
    step = -(-n // parts)
    batches: list[bytes] = []
    for i in range(0, n, step):
        last = i + step >= n
        batches += encode_batches(
            cols.slice(i, i + step),
            watermark if last else previous_watermark,
            end and last,
            limit=limit,
            previous_watermark=previous_watermark,
        )
    return batches
