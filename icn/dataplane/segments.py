"""Segmented objects: reading Content and FinalBlockId, and fetching ``<name>/seg=<i>`` objects
with the fetcher (status datasets, files, large values).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from icn.dataplane.fetcher import Fetcher, FetchPolicy, fetch
from icn.errors import DecodeError, InterestTimeout, ValidationError
from icn.security.manifest import Manifest, manifest_name
from icn.wire import tlv_types as T
from icn.wire.name import segment, to_uri
from icn.wire.packet import DataView
from icn.wire.tlv import read_nni, read_tl

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint
    from icn.security.trust import Validator


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
    validator: Validator | None = None,
    forwarding_hint: list[bytes] | None = None,
) -> bytes:
    """Fetch and reassemble a segmented object (``<name>[/<version>]/seg=<i>``).

    The first Interest (CanBePrefix, MustBeFresh) learns the segment prefix and, from
    FinalBlockId, the last segment; then every other segment is asked for by exact name, as
    many at once as the fetcher's window allows (``window`` to start with, growing while
    nothing is lost).  Without a FinalBlockId yet, segments are requested ahead until one says
    where the object ends.  Each segment is asked again after a loss, ``retries`` times, then
    InterestTimeout; a Nack raises InterestNack; ``timeout`` bounds the whole fetch;
    DecodeError if the reply is not a segment or exceeds ``max_size``.  ``verify`` checks every
    segment as :meth:`express` does; ``validator`` validates each (the first with fetching of
    its signer's certificates, the others against the chain then known: see
    :mod:`icn.dataplane.validating`), a refused one failing the fetch.  ``forwarding_hint``
    (names) goes with every Interest: where to look for an object whose name does not say.
    :func:`fetch_segments_buffer` returns the buffer the
    segments were written into, without this function's copy of it into ``bytes``.
    """
    return bytes(
        await fetch_segments_buffer(
            ep,
            name,
            window=window,
            lifetime_ms=lifetime_ms,
            must_be_fresh=must_be_fresh,
            retries=retries,
            timeout=timeout,
            max_size=max_size,
            verify=verify,
            validator=validator,
            forwarding_hint=forwarding_hint,
        )
    )


async def fetch_segments_buffer(
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
    validator: Validator | None = None,
    forwarding_hint: list[bytes] | None = None,
) -> bytearray:
    """:func:`fetch_segments`, the object returned in the one buffer each segment's content was
    copied into as it arrived (for large objects: one object-sized buffer, one copy of each
    byte out of its packet, no join)."""
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
                forwarding_hint=forwarding_hint,
            )
            if validator is not None:
                from icn.dataplane.validating import check_cached, validated

                await validated(first, validator, ep.counters)
                verify = _both(verify, check_cached(validator, ep.counters))
            seg_prefix, first_seg = split_segment(first.name, first.name_ends)
            if first_seg is None:
                if first.name == value:  # a small object that is not segmented
                    return bytearray(content_view(first.wire))
                raise DecodeError(f"{to_uri(first.name)} does not end in a segment number")
            final = segment_number(final_block_id(first))
            parts = Assembly(seg_prefix, max_size)
            parts.put(first_seg, content_view(first.wire), final)
            return await _fetch_rest(ep, seg_prefix, parts, final, policy, verify, forwarding_hint)
    except TimeoutError:
        raise InterestTimeout(to_uri(value), 0, timeout) from None


def _both(
    first: Callable[[DataView], None] | None, then: Callable[[DataView], None]
) -> Callable[[DataView], None]:
    if first is None:
        return then

    def verify(dv: DataView) -> None:
        first(dv)
        then(dv)

    return verify


class Assembly:
    """Segment contents as they arrive.  While every segment but the last has the first one's
    size (what publishers make), each is copied once into one buffer at its place; a segment of
    another size turns the rest into pieces kept apart and joined at the end."""

    __slots__ = ("_placed", "buf", "last", "max_size", "pieces", "prefix", "step", "total")

    def __init__(self, prefix: bytes, max_size: int) -> None:
        self.prefix = prefix
        self.max_size = max_size
        self.buf = bytearray()
        self.step = -1  # the segment size, from the first segment put
        self.last: tuple[int, int] | None = None  # a shorter final segment in buf: (seg, length)
        self.pieces: dict[int, bytes] | None = None
        self._placed: set[int] = set()  # segments copied into buf
        self.total = 0

    def __contains__(self, seg: int) -> bool:
        if self.pieces is not None:
            return seg in self.pieces
        return seg in self._placed

    def put(self, seg: int, content: memoryview, final: int | None) -> None:
        """Keep segment ``seg`` (a segment already kept is ignored); DecodeError past max_size."""
        if seg in self:
            return
        self.total += len(content)
        if self.total > self.max_size:
            raise DecodeError(f"{to_uri(self.prefix)} is larger than {self.max_size} bytes")
        if self.pieces is None:
            if self.step < 0:
                self.step = len(content)
            step = self.step
            regular = len(content) == step or (
                final is not None and seg == final and len(content) < step and self.last is None
            )
            if step > 0 and regular and (final is None or seg <= final):
                if final is not None and final * step >= self.max_size:
                    # segments 0..final-1 alone would pass the bound: refused before the
                    # buffer for them is allocated (a FinalBlockId is the producer's word)
                    raise DecodeError(f"{to_uri(self.prefix)} is larger than {self.max_size} bytes")
                start = seg * step
                need = (seg + 1) * step if final is None else (final + 1) * step
                if len(self.buf) < need:
                    if not self.buf:
                        self.buf = bytearray(need)  # zeroed lazily by the allocator
                    else:
                        self.buf.extend(bytes(need - len(self.buf)))
                self.buf[start : start + len(content)] = content
                self._placed.add(seg)
                if len(content) < step:
                    self.last = (seg, len(content))
                return
            self._to_pieces()
        assert self.pieces is not None
        self.pieces[seg] = bytes(content)

    def _to_pieces(self) -> None:
        step, last = self.step, self.last
        self.pieces = {
            s: bytes(self.buf[s * step : s * step + (last[1] if last and last[0] == s else step)])
            for s in self._placed
        }
        self.buf = bytearray()
        self._placed = set()

    def result(self, final: int) -> bytearray:
        """The object, segments 0..final (all of them kept)."""
        if self.pieces is not None:
            return bytearray(b"".join(self.pieces[i] for i in range(final + 1)))
        end = final * self.step + (self.last[1] if self.last else self.step)
        del self.buf[end:]
        return self.buf


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
    parts: Assembly,
    final: int | None,
    policy: FetchPolicy,
    verify: Callable[[DataView], None] | None,
    forwarding_hint: list[bytes] | None = None,
) -> bytearray:
    nxt = 0
    missing = 0 if final is None else sum(1 for i in range(final + 1) if i not in parts)

    def next_key() -> int | None:
        nonlocal nxt
        while final is None or nxt <= final:
            seg, nxt = nxt, nxt + 1
            if seg not in parts:
                return seg
        return None

    def on_data(seg: int, dv: DataView) -> None:
        nonlocal final, missing
        if seg in parts:
            return
        start, end, last_comp = _content_range(dv.wire)
        last = segment_number(last_comp)
        learnt = last is not None and (final is None or last < final)
        if last is not None and learnt:
            final = last
            for other in fetcher.window.in_flight_keys():
                if other > last:  # asked for before the end was known
                    fetcher.cancel(other)
        if final is not None and seg > final:
            return
        parts.put(seg, memoryview(dv.wire)[start:end], final)
        if learnt:
            assert final is not None
            missing = sum(1 for i in range(final + 1) if i not in parts)
        elif final is not None:
            missing -= 1
        if final is not None and not missing:
            fetcher.finish()

    fetcher: Fetcher[int] = Fetcher(
        ep,
        policy,
        lambda seg: prefix + segment(seg),
        next_key,
        on_data,
        verify=verify,
        interest=None if forwarding_hint is None else {"forwarding_hint": forwarding_hint},
    )
    if final is None or missing:
        await fetcher.run()
    assert final is not None  # the fetcher finishes only once the end is known
    return parts.result(final)


def data_content(data: DataView) -> bytes:
    """The Content of a Data packet (a copy: where parse_data found it, else looked up)."""
    if data.content_start >= 0:
        return data.wire[data.content_start : data.content_end]
    start, end, _ = _content_range(data.wire)
    return data.wire[start:end]


def content_view(wire: bytes) -> memoryview:
    """The Content of a Data packet's wire, without copying it."""
    start, end, _ = _content_range(wire)
    return memoryview(wire)[start:end]


def final_block_id(data: DataView) -> bytes | None:
    """The FinalBlockId name component (whole TLV) of a Data packet, if any."""
    return _content_range(data.wire)[2]


def _content_range(wire: bytes) -> tuple[int, int, bytes | None]:
    """Where a Data packet's Content value starts and ends, and its FinalBlockId if any."""
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
            return vstart, vend, final
        off = vend
    return end, end, final


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


class _Manifested(ValidationError):
    """A segment signed by its digest alone: its object is signed once, by a manifest."""


async def fetch_signed(
    ep: Endpoint,
    name: bytes,
    verify: Callable[[DataView], None] | None,
    **options: Any,
) -> bytes:
    """:func:`fetch_segments` of an unversioned object its producer signed once or per segment
    (see :func:`~icn.dataplane.publish.signed_once`): each segment must pass ``verify``, unless
    it is signed by its digest alone; then the object's manifest is fetched and must pass
    ``verify`` (one signature checked), and every segment must match its digest in it.  A forged
    digest segment gains nothing: it only sends the consumer to the manifest, which the producer
    signed.  ``options`` go to :func:`fetch_segments` (window, lifetime_ms, retries...)."""
    if verify is None:
        return await fetch_segments(ep, name, **options)
    check = verify
    manifest = manifest_name(name)

    def per_segment(dv: DataView) -> None:
        # (a cache may answer the CanBePrefix Interest for the object with its manifest's
        # first segment, named under it: the object is manifested, then)
        if signature_type(dv) == T.SIG_DIGEST_SHA256 or dv.name.startswith(manifest):
            raise _Manifested("a segment signed by its digest")
        check(dv)

    try:
        return await fetch_segments(ep, name, verify=per_segment, **options)
    except _Manifested:
        pass
    listed = Manifest.decode(await fetch_segments(ep, manifest, verify=verify, **options))
    # the segments by their exact names, from segment 0: the object's name alone could again
    # be answered with the manifest
    first = name + segment(0)
    return await fetch_segments(ep, first, verify=lambda dv: listed.check(name, dv), **options)


def signature_type(dv: DataView) -> int | None:
    """The SignatureType of a parsed Data packet (None if it has no SignatureInfo, or one that
    does not decode: the signature check then says what is wrong with it)."""
    start, end = dv.sig_info_start, dv.sig_info_end
    wire = dv.wire
    try:
        while 0 <= start < end:
            typ, vstart, vend = read_tl(wire, start, end)
            if typ == T.SIGNATURE_TYPE:
                return read_nni(wire, vstart, vend)
            start = vend
    except DecodeError:
        return None
    return None
