"""Segmented objects: reading Content and FinalBlockId, and fetching ``<name>/seg=<i>`` objects
with the fetcher (status datasets, files, large values).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from icn.dataplane.fetcher import Fetcher, FetchPolicy, fetch
from icn.errors import DecodeError, InterestTimeout
from icn.wire import tlv_types as T
from icn.wire.name import segment, to_uri
from icn.wire.packet import DataView
from icn.wire.tlv import read_nni, read_tl

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint


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
    FinalBlockId, the last segment; then every other segment is asked for by exact name, as
    many at once as the fetcher's window allows (``window`` to start with, growing while
    nothing is lost).  Without a FinalBlockId yet, segments are requested ahead until one says
    where the object ends.  Each segment is asked again after a loss, ``retries`` times, then
    InterestTimeout; a Nack raises InterestNack; ``timeout`` bounds the whole fetch;
    DecodeError if the reply is not a segment or exceeds ``max_size``.  ``verify`` checks every
    segment as :meth:`express` does.
    """
    value = name
    policy = segment_policy(lifetime_ms, retries, window)
    try:
        async with asyncio.timeout(timeout):
            first = await fetch(
                ep,
                value,
                policy,
                verify=verify,
                can_be_prefix=True,
                must_be_fresh=must_be_fresh,
            )
            seg_prefix, first_seg = split_segment(first.name, first.name_ends)
            if first_seg is None:
                if first.name == value:  # a small object that is not segmented
                    return data_content(first)
                raise DecodeError(f"{to_uri(first.name)} does not end in a segment number")
            got = {first_seg: data_content(first)}
            final = segment_number(final_block_id(first))
            return await _fetch_rest(ep, seg_prefix, got, final, policy, max_size, verify)
    except TimeoutError:
        raise InterestTimeout(to_uri(value), 0, timeout) from None


@lru_cache(maxsize=64)
def segment_policy(lifetime_ms: int, retries: int, window: int) -> FetchPolicy:
    """Segments are there to be fetched: a Nack is final, a loss is re-sent at the RTO, and
    the window starts at ``window`` and grows to 64 (cached: made once per caller)."""
    return FetchPolicy(
        lifetime_ms=lifetime_ms,
        max_retries=retries,
        nack_gives_up=True,
        initial_window=max(window, 1),
        max_window=max(window, 64),
    )


async def _fetch_rest(
    ep: Endpoint,
    prefix: bytes,
    got: dict[int, bytes],
    final: int | None,
    policy: FetchPolicy,
    max_size: int,
    verify: Callable[[DataView], None] | None,
) -> bytes:
    size, nxt = sum(map(len, got.values())), 0
    missing = 0 if final is None else sum(1 for i in range(final + 1) if i not in got)

    def next_key() -> int | None:
        nonlocal nxt
        while final is None or nxt <= final:
            seg, nxt = nxt, nxt + 1
            if seg not in got:
                return seg
        return None

    def on_data(seg: int, dv: DataView) -> None:
        nonlocal size, final, missing
        if seg in got:
            return
        got[seg] = content = data_content(dv)
        size += len(content)
        if size > max_size:
            raise DecodeError(f"{to_uri(prefix)} is larger than {max_size} bytes")
        last = segment_number(final_block_id(dv))
        if last is not None and (final is None or last < final):
            final = last
            for other in fetcher.window.in_flight_keys():
                if other > final:  # asked for before the end was known
                    fetcher.cancel(other)
            missing = sum(1 for i in range(final + 1) if i not in got)
        elif final is not None and seg <= final:
            missing -= 1
        if final is not None and not missing:
            fetcher.finish()

    fetcher: Fetcher[int] = Fetcher(
        ep, policy, lambda seg: prefix + segment(seg), next_key, on_data, verify=verify
    )
    if final is None or missing:
        await fetcher.run()
    assert final is not None  # the fetcher finishes only once the end is known
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
