"""Segmented objects: reading Content and FinalBlockId, and fetching ``<name>/seg=<i>`` objects
with a window of Interests in flight (status datasets, files, large values).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from icn import tlv_types as T
from icn.errors import DecodeError, InterestTimeout
from icn.name import segment, to_uri
from icn.packet import DataView
from icn.tlv import read_nni, read_tl

if TYPE_CHECKING:
    from icn.endpoint import Endpoint, PendingInterest


async def fetch_segments(
    ep: Endpoint,
    name: bytes,
    *,
    window: int = 8,
    lifetime_ms: int = T.DEFAULT_INTEREST_LIFETIME_MS,
    must_be_fresh: bool = True,
    retries: int = 2,
    timeout: float | None = None,
    max_size: int = 256 << 20,
    verify: Callable[[DataView], None] | None = None,
) -> bytes:
    """Fetch and reassemble a segmented object (``<name>[/<version>]/seg=<i>``).

    The first Interest (CanBePrefix, MustBeFresh) learns the segment prefix and, from
    FinalBlockId, the last segment; the others go by exact name, ``window`` in flight.
    Without a FinalBlockId yet, segments are requested ahead until one says where the
    object ends.  InterestTimeout/InterestNack as for :meth:`express`; ``timeout`` bounds
    the whole fetch; DecodeError if the reply is not a segment or exceeds ``max_size``.
    ``verify`` checks every segment as :meth:`express` does.
    """
    value = name
    try:
        async with asyncio.timeout(timeout):
            first = await ep.express(
                value,
                can_be_prefix=True,
                must_be_fresh=must_be_fresh,
                lifetime_ms=lifetime_ms,
                retries=retries,
                verify=verify,
            )
            seg_prefix, first_seg = split_segment(first.name, first.name_ends)
            if first_seg is None:
                if first.name == value:  # a small object that is not segmented
                    return data_content(first)
                raise DecodeError(f"{to_uri(first.name)} does not end in a segment number")
            got = {first_seg: data_content(first)}
            final = segment_number(final_block_id(first))
            return await _fetch_rest(
                ep, seg_prefix, got, final, window, max_size, lifetime_ms, retries, verify
            )
    except TimeoutError:
        raise InterestTimeout(to_uri(value), 0, timeout) from None


async def _fetch_rest(
    ep: Endpoint,
    prefix: bytes,
    got: dict[int, bytes],
    final: int | None,
    window: int,
    max_size: int,
    lifetime_ms: int,
    retries: int,
    verify: Callable[[DataView], None] | None,
) -> bytes:
    flight: dict[asyncio.Future[DataView], tuple[int, PendingInterest]] = {}
    size, nxt = sum(map(len, got.values())), 0
    try:
        while True:
            while len(flight) < max(window, 1) and (final is None or nxt <= final):
                if nxt not in got:
                    name = prefix + segment(nxt)
                    rec = ep.start(name, lifetime_ms=lifetime_ms, retries=retries)
                    rec.verify = verify
                    flight[rec.future] = (nxt, rec)
                nxt += 1
            if not flight:
                break
            done, _ = await asyncio.wait(flight, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                seg, rec = flight.pop(fut)
                ep.drop(rec)
                if final is not None and seg > final:
                    continue  # asked for before the end was known
                dv = fut.result()  # InterestTimeout / InterestNack end the fetch
                got[seg] = content = data_content(dv)
                size += len(content)
                if size > max_size:
                    raise DecodeError(f"{to_uri(prefix)} is larger than {max_size} bytes")
                last = segment_number(final_block_id(dv))
                if last is not None and (final is None or last < final):
                    final = last
                    for f, (s, r) in list(flight.items()):
                        if s > final:
                            ep.drop(r)
                            del flight[f]
    finally:
        for _, rec in flight.values():
            ep.drop(rec)
    if final is None or any(i not in got for i in range(final + 1)):
        raise DecodeError(f"{to_uri(prefix)}: segments missing below FinalBlockId")
    return b"".join(got[i] for i in range(final + 1))


def data_content(data: DataView) -> bytes:
    """The Content of a Data packet (DataView reads only what forwarding needs)."""
    return _data_fields(data.wire)[0]


def final_block_id(data: DataView) -> bytes | None:
    """The FinalBlockId name component (whole TLV) of a Data packet, if any."""
    return _data_fields(data.wire)[1]


def _data_fields(wire: bytes) -> tuple[bytes, bytes | None]:
    _, off, end = read_tl(wire, 0, len(wire))
    off = read_tl(wire, off, end)[2]  # skip the Name
    final = None
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        if typ == T.META_INFO:
            moff = vstart
            while moff < vend:
                mtyp, mstart, mend = read_tl(wire, moff, vend)
                if mtyp == T.FINAL_BLOCK_ID:
                    final = wire[mstart:mend]
                moff = mend
        elif typ == T.CONTENT:
            return wire[vstart:vend], final
        off = vend
    return b"", final


def split_segment(name: bytes, ends: list[int]) -> tuple[bytes, int | None]:
    """(name without its last component, that component's segment number or None)."""
    start = ends[-2] if len(ends) > 1 else 0
    return name[:start], segment_number(name[start:])


def segment_number(component: bytes | None) -> int | None:
    if not component or component[0] != T.COMP_SEGMENT:
        return None
    _, vstart, vend = read_tl(component, 0, len(component))
    try:
        return read_nni(component, vstart, vend)
    except DecodeError:
        return None
