"""Ring allreduce over named data, the baseline of the benchmark (no aggregator, no tree).

The flat array is cut into one segment per worker.  In N-1 reduce-scatter steps each worker
pulls from its left neighbour the partial that neighbour holds for one segment and folds its
own into it; in N-1 allgather steps the finished segments travel round.  Each worker publishes
what it passes under ``/<job>/ring/<worker>/<round>/<step>/<chunk>``.  Every segment is
finished by one worker and copied to the others, so all workers hold the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from compute.collective.combine import read_part
from compute.collective.errors import CollectiveError
from compute.collective.names import JobNames
from compute.collective.ops import fold
from compute.collective.wire import Layout, chunk_lead

if TYPE_CHECKING:
    from compute.collective.worker import Collective


def segment_bounds(items: int, n: int) -> list[tuple[int, int]]:
    return [(j * items // n, (j + 1) * items // n) for j in range(n)]


def ring_reference(arrays: Sequence[np.ndarray[Any, Any]], op: str) -> np.ndarray[Any, Any]:
    """What ring allreduce computes: segment j folded from worker j round the ring."""
    n = len(arrays)
    flats = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    out = np.empty_like(flats[0])
    for j, (lo, hi) in enumerate(segment_bounds(len(out), n)):
        order = [flats[(j + k) % n][lo:hi] for k in range(n)]
        out[lo:hi] = fold(order, op)
    return out.reshape(np.shape(arrays[0]))


async def ring_allreduce(
    coll: Collective,
    rnd: int,
    arr: np.ndarray[Any, Any],
    op: str,
    out: np.ndarray[Any, Any] | None = None,
) -> np.ndarray[Any, Any]:
    """Ring allreduce of ``arr``, worked out in ``out`` (checked by the caller; may be
    ``arr``) or in a copy of ``arr``."""
    n, i = coll.size, coll.rank
    if out is None:
        acc = np.array(arr, copy=True).reshape(-1)
    else:
        acc = out.reshape(-1)
        if not np.may_share_memory(out, arr):
            acc[...] = arr.reshape(-1)
    if n == 1:
        return acc.reshape(arr.shape)
    bounds = segment_bounds(len(acc), n)
    left = coll.plan.workers[(i - 1) % n]
    left_prefix = coll.names.ring_prefix(left)
    what = f"{coll.names.job} round {rnd} (ring)"

    def publish(step: int, seg: int) -> None:
        lo, hi = bounds[seg]
        part = acc[lo:hi]
        layout = Layout.of(part, coll.chunk_bytes)
        lead = chunk_lead(layout.header(op, 1))
        data = part.view(np.uint8).data
        for c in range(layout.chunks):
            start, end = layout.span(c)
            # copied into its packet: the allgather overwrites this segment of acc later
            coll.ring_publisher.put((rnd, step, c), data[start:end], lead)

    async def pull(step: int, seg: int, reduce: bool) -> None:
        lo, hi = bounds[seg]
        target = acc[lo:hi]
        layout = Layout.of(target, coll.chunk_bytes)
        names = [JobNames.piece(left_prefix, rnd, step, c) for c in range(layout.chunks)]
        items = layout.chunk_bytes // max(acc.itemsize, 1)

        def place(c: int, content: memoryview) -> None:
            header, part = read_part(content, f"worker {left}")
            if Layout.from_header(header) != layout or header.get("op") != op:
                raise CollectiveError(f"{what}: worker {left} sent another layout or op")
            piece = target[c * items : c * items + len(part)]
            if len(piece) != len(part):
                raise CollectiveError(f"{what}: chunk {c} has {len(part)} items")
            if reduce:
                piece[:] = fold([part, piece], op)
            else:
                piece[:] = part
            coll.counters["bytes_received"] += part.nbytes

        await coll.fetch(names, place, what)

    for step in range(n - 1):  # reduce-scatter
        publish(step, (i - step) % n)
        await pull(step, (i - 1 - step) % n, reduce=True)
    for s in range(n - 1):  # allgather
        step = n - 1 + s
        publish(step, (i + 1 - s) % n)
        await pull(step, (i - s) % n, reduce=False)
    return acc.reshape(arr.shape)
