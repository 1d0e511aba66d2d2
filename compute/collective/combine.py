"""Adding children's chunks: check they agree, then fold them in the plan's order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compute.collective.errors import CollectiveError
from compute.collective.ops import fold
from compute.collective.shared import Ref, SharedMaps
from compute.collective.wire import Layout, chunk_lead, decode_chunk, payload_array
from icn.errors import DecodeError
from icn.wire.tlv import Buffer

Part = tuple[dict[str, Any], Any]  # (header, 1-D array)


def read_part(content: Buffer, source: str, maps: SharedMaps | None = None) -> Part:
    """A child's chunk, decoded (its array a view of ``content``, or of the shared memory its
    header refers to: then :func:`check_parts` once it has been read); its error (if it
    reports one) raised as CollectiveError."""
    try:
        header, payload = decode_chunk(content)
        if "error" in header:
            raise CollectiveError(str(header["error"]))
        if "shm" in header:
            if payload or maps is None:
                raise DecodeError("a shared-memory reference where chunk bytes were expected")
            payload = maps.view(Ref.decode(header["shm"]), source)
        return header, payload_array(header, payload)
    except (DecodeError, ValueError) as exc:
        raise CollectiveError(f"{source} sent a malformed chunk: {exc}") from None


def check_parts(parts: Sequence[Part], sources: Sequence[str], maps: SharedMaps) -> None:
    """CollectiveError if a part read from shared memory was overwritten while it was read."""
    for (header, _), source in zip(parts, sources, strict=True):
        ref = header.get("shm")
        if ref is not None:
            maps.check(Ref.decode(ref), source)


def combine(
    parts: Sequence[Part],
    sources: Sequence[str],
    out: Callable[[np.dtype[Any], int], np.ndarray[Any, Any]] | None = None,
) -> Part:
    """One part covering all of ``parts``: same layout and operation required.  ``out(dtype,
    items)`` lends the array to fold into (a reused buffer); else a new one."""
    first = parts[0][0]
    key = (first.get("dt"), first.get("shape"), first.get("cb"), first.get("op"))
    for (header, array), source in zip(parts, sources, strict=True):
        if (header.get("dt"), header.get("shape"), header.get("cb"), header.get("op")) != key:
            raise CollectiveError(
                f"{source} disagrees with {sources[0]}: dtype {header.get('dt')} shape "
                f"{header.get('shape')} op {header.get('op')} against {key[0]} {key[1]} {key[3]}"
                " (every worker must call the same operation on arrays of one shape and dtype)"
            )
        if len(array) != len(parts[0][1]):
            raise CollectiveError(
                f"{source}: chunk of {len(array)} items, expected {len(parts[0][1])}"
            )
    arrays = [array for _, array in parts]
    into = None if out is None else out(arrays[0].dtype, len(arrays[0]))
    total = fold(arrays, str(first["op"]), into)
    header = dict(first)
    header.pop("shm", None)  # where the first part was, not the total
    header["n"] = sum(int(h.get("n", 1)) for h, _ in parts)
    return header, total


def part_pieces(part: Part) -> tuple[bytes, memoryview]:
    """A part as a chunk's Content in two pieces: its lead (header) and its payload (a view of
    the part's array)."""
    header, array = part
    Layout.from_header(header)  # only well-formed headers go out
    return chunk_lead(header), array.view("u1").data


def encode_part(part: Part) -> bytes:
    lead, payload = part_pieces(part)
    return lead + payload
