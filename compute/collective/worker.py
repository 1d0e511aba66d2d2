"""A worker's side of a job: ``Collective(plan, worker, endpoint)``.

Each call is one round, numbered in call order, so every worker must make the same calls in the
same order (as with MPI or torch.distributed).  The worker publishes its array as chunks under
``/<job>/w/<worker>/<round>/<chunk>`` and, for an allreduce, pulls ``/<job>/sum/<round>/<chunk>``
with a window of Interests in flight: the workers' Interests meet in the PITs, so one sum Data
per chunk comes down the tree to all of them, and is cached on the way for whoever lost it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from compute.collective.checks import ChunkCheck
from compute.collective.combine import check_parts, read_part
from compute.collective.errors import CollectiveError
from compute.collective.fetch import fetch_many
from compute.collective.names import JobNames
from compute.collective.ops import check_op, finish
from compute.collective.plan import Plan
from compute.collective.publisher import ChunkPublisher
from compute.collective.shared import SharedArena, SharedMaps
from compute.collective.wire import Layout, chunk_lead, chunk_signer
from icn.dataplane.endpoint import Endpoint
from icn.security.trust import Validator
from icn.wire import tlv_types as T

# A chunk fits one packet on any path (8800 bytes with name, header and signature); on faces
# that stay on the host (Unix sockets, in-memory) pass a larger chunk_bytes, e.g. LOCAL_CHUNK
# with a window of 8.  Measured (16 MiB float32, 4 workers, one forwarder, results in out=):
# 256 KiB x 16 in flight took 156-204 ms and 130-155 ms of the workers' CPU per round, 1 MiB x 8
# 114-144 ms and 96-101 ms, 2 MiB x 4 104-135 ms and 86-91 ms; at 8 workers 321, 204 and 186
# ms.  Past 1 MiB the per-packet costs are paid off and the gain is small.
DEFAULT_CHUNK = 8192
"""Bytes per chunk by default: one packet on any path."""
LOCAL_CHUNK = 1024 * 1024
"""Bytes per chunk for faces that stay on the host (Unix sockets, in memory), with window 8."""
MAX_CHUNK = T.MAX_LOCAL_PACKET_SIZE - 4096  # room for the name, chunk header and signature
# shared: a chunk is a place in a memory file, not a packet: only the pipelining bounds it.
# Measured (bench/allreduce.py in-network, 2-8 workers, 16 and 64 MiB, three alternating runs):
# 1 MiB chunks 0.60-1.12 of gloo's time, 4 MiB 0.32-0.48 (each chunk costs its packets' trip)
SHARED_CHUNK = 4 << 20
"""Bytes per chunk when chunks travel in shared memory (``shared=True``, one host)."""
MAX_SHARED_CHUNK = 64 << 20
Mode = Literal["tree", "ring"]


def as_array(value: Any) -> np.ndarray[Any, Any]:
    """A C-contiguous array of ``value``, keeping a 0-d shape (ascontiguousarray makes 1-d)."""
    arr = np.asarray(value)
    return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)


class Collective:
    """Collective operations of ``worker`` in ``plan``, over ``ep``.  ``await start()`` first.

    ``mode="tree"`` reduces through the plan's aggregators (in the network, or one parameter
    server with :meth:`Plan.flat`); ``mode="ring"`` runs ring allreduce among the workers (no
    aggregator).  ``deadline`` bounds each operation: past it, CollectiveError.

    ``signature``: how this worker's chunks are signed (digest, null, or cert: ``ep.signer``,
    a certificate signer).  ``validator`` (the project's one, built with
    ``fetch=cert_fetcher(ep)``): every chunk this worker fetches (sums, other workers' chunks)
    is validated before it is used; a refused one is dropped, counted (``chunks_refused``),
    asked again past caches, and after a few refusals the operation fails with a
    CollectiveError naming the refusal (:mod:`compute.collective.checks`)."""

    def __init__(
        self,
        plan: Plan,
        worker: str,
        ep: Endpoint,
        *,
        mode: Mode = "tree",
        chunk_bytes: int | None = None,
        window: int = 16,
        lifetime_ms: int = 1000,
        deadline: float = 60.0,
        keep_rounds: int = 4,
        signature: str = "digest",
        shared: bool = False,
        validator: Validator | None = None,
    ) -> None:
        if worker not in plan.workers:
            raise CollectiveError(f"{worker!r} is not a worker of the plan", plan.job)
        if mode not in ("tree", "ring"):
            raise CollectiveError(f"mode {mode!r}: use tree or ring", plan.job)
        if chunk_bytes is None:  # one packet on any path; with shared, SHARED_CHUNK
            chunk_bytes = SHARED_CHUNK if shared else DEFAULT_CHUNK
        if shared and mode != "tree":
            raise CollectiveError(
                f"shared=True works in mode tree (through aggregators), not {mode}", plan.job
            )
        if shared and not 64 <= chunk_bytes <= MAX_SHARED_CHUNK:
            raise CollectiveError(
                f"chunk_bytes {chunk_bytes}: with shared=True must be in [64, {MAX_SHARED_CHUNK}]",
                plan.job,
            )
        if not shared and not 64 <= chunk_bytes <= MAX_CHUNK:
            raise CollectiveError(
                f"chunk_bytes {chunk_bytes}: must be in [64, {MAX_CHUNK}] (a chunk, its header, "
                "name and signature travel in one packet; local faces carry up to 4 MiB)",
                plan.job,
            )
        self.plan, self.worker, self.ep, self.mode = plan, worker, ep, mode
        self.rank = plan.workers.index(worker)
        self.size = len(plan.workers)
        self.names = JobNames(plan.job)
        self.chunk_bytes = chunk_bytes
        self.window = window
        self.lifetime_ms = lifetime_ms
        self.deadline = deadline
        self.counters: Counter[str] = Counter()
        self.round = 0
        # shared: allreduce's chunks go through a memory file (compute/collective/shared)
        self.arena = SharedArena(f"icn-w-{worker}", keep_rounds) if shared else None
        self.maps = SharedMaps()  # sums in shared memory, whatever ``shared`` is
        signer = chunk_signer(signature, plan.job, ep.signer)
        self.check = None if validator is None else ChunkCheck(validator, self.counters)
        self.publisher = ChunkPublisher(
            ep,
            self.names.worker_prefix(worker),
            keep_rounds=keep_rounds,
            counters=self.counters,
            signer=signer,
        )
        self.ring_publisher = ChunkPublisher(
            ep,
            self.names.ring_prefix(worker),
            depth=3,
            keep_rounds=keep_rounds,
            counters=self.counters,
            signer=signer,
        )

    async def start(self) -> None:
        """Register this worker's prefixes: aggregators (and ring peers) may pull its chunks."""
        await self.publisher.start()
        if self.mode == "ring":
            await self.ring_publisher.start()

    async def close(self) -> None:
        """Withdraw the prefixes and free the shared memory; the endpoint stays open."""
        await self.publisher.close()
        if self.mode == "ring":
            await self.ring_publisher.close()
        self.maps.close()
        if self.arena is not None:
            self.arena.close()
        if self.check is not None:
            self.check.close()

    async def __aenter__(self) -> Collective:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stats(self) -> dict[str, int]:
        """This worker's counters (rounds, chunks, bytes, retried Interests...)."""
        return dict(self.counters)

    # ---- the operations ------------------------------------------------------------------------

    async def allreduce(
        self, array: Any, op: str = "sum", *, out: np.ndarray[Any, Any] | None = None
    ) -> np.ndarray[Any, Any]:
        """The elementwise ``op`` (sum, mean, max, min, prod) of every worker's ``array``; the same
        bits at every worker (the mean divides the sum, so integer arrays give floats).

        ``out``: a C-contiguous writeable array of ``array``'s shape and dtype that receives
        the result and is returned (``array`` itself for an in-place allreduce, as torch's
        ``all_reduce``).  Without it the result is a new array: memory touched for the first
        time, whose page faults can cost more than the copies of the whole operation."""
        check_op(op)
        arr = as_array(array)
        dest = None if out is None else self._out(out, arr, op)
        if self.mode == "ring":
            from compute.collective.ring import ring_allreduce

            rnd = self._next_round()
            total = await ring_allreduce(self, rnd, arr, op, dest)
            return finish(total, op, self.size, dest is not None)
        rnd = self._next_round()
        # the chunks are views of ``arr`` (the caller leaves it alone until this returns, as
        # with torch's in-place all_reduce): once the whole sum is back every chunk has been
        # consumed and the round is retired; after a failure others may still pull them, so
        # they are copied into their packets before the caller may change the array.  A
        # result written over ``arr`` as it arrives would change them: then they are copied.
        view = dest is None or not np.may_share_memory(dest, arr)
        if self.arena is not None:
            layout = self._publish_shared(rnd, arr, op, self.arena)
        else:
            layout = self._publish(rnd, arr, op, view=view)
        try:
            total = await self._fetch_sum(rnd, layout, dest)
        except BaseException:
            self.publisher.detach(rnd)
            raise
        self.publisher.retire(rnd)
        return finish(total, op, self.size, dest is not None)

    def _out(
        self, out: np.ndarray[Any, Any], arr: np.ndarray[Any, Any], op: str
    ) -> np.ndarray[Any, Any]:
        """``out`` checked for :meth:`allreduce`: CollectiveError naming what does not fit."""
        job = self.names.job
        if not isinstance(out, np.ndarray):
            raise CollectiveError(f"out: a numpy array, not {type(out).__name__}", job)
        if out.shape != arr.shape or out.dtype != arr.dtype:
            raise CollectiveError(
                f"out: shape {out.shape} dtype {out.dtype}, the array's are {arr.shape} "
                f"{arr.dtype} (pass an array like it, e.g. numpy.empty_like(array))",
                job,
            )
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise CollectiveError("out: must be C-contiguous and writeable", job)
        if op == "mean" and out.dtype.kind not in "fc":
            raise CollectiveError(
                f"out: the mean of {out.dtype} is a float array; pass no out, or sum", job
            )
        return out

    async def reduce(self, array: Any, op: str = "sum", root: str | None = None) -> Any:
        """The reduction at worker ``root`` (the first worker by default); None elsewhere.
        The others return at once: keep the Collective open until the root has it."""
        check_op(op)
        root = self._member(root)
        rnd = self._next_round()
        layout = self._publish(rnd, as_array(array), op)
        if self.worker != root:
            return None
        return finish(await self._fetch_sum(rnd, layout), op, self.size)

    async def broadcast(self, array: Any = None, root: str | None = None) -> np.ndarray[Any, Any]:
        """``root``'s array at every worker (the others pass nothing)."""
        root = self._member(root)
        rnd = self._next_round()
        if self.worker == root:
            if array is None:
                raise CollectiveError("broadcast: the root must pass an array", self.names.job)
            arr = as_array(array)
            self._publish(rnd, arr, "sum")
            return arr
        return (await self._pull_arrays([root], rnd))[0]

    async def allgather(self, array: Any) -> list[np.ndarray[Any, Any]]:
        """Every worker's array, in worker order (this worker's own included)."""
        rnd = self._next_round()
        arr = as_array(array)
        self._publish(rnd, arr, "sum")
        others = [w for w in self.plan.workers if w != self.worker]
        got = dict(zip(others, await self._pull_arrays(others, rnd), strict=True))
        got[self.worker] = arr
        return [got[w] for w in self.plan.workers]

    async def barrier(self) -> None:
        """Return when every worker has reached this call."""
        await self.allreduce(np.zeros(1, dtype=np.uint8), "max")

    # ---- pieces ----------------------------------------------------------------------------------

    def _next_round(self) -> int:
        rnd = self.round
        self.round += 1
        return rnd

    def _member(self, root: str | None) -> str:
        if root is None:
            return self.plan.workers[0]
        if root not in self.plan.workers:
            raise CollectiveError(f"root {root!r} is not a worker of the plan", self.names.job)
        return root

    def _publish(self, rnd: int, arr: np.ndarray[Any, Any], op: str, view: bool = False) -> Layout:
        """Publish ``arr`` as round ``rnd``'s chunks.  Each is copied once, into its packet:
        the caller may change its array while others still pull this round (reduce, broadcast
        and allgather return before they have); with ``view`` the packets' payloads are views
        of ``arr`` instead (the caller retires the round before ``arr`` may change)."""
        if arr.dtype.hasobject:
            raise CollectiveError(f"dtype {arr.dtype}: only numeric arrays travel", self.names.job)
        layout = Layout.of(arr, self.chunk_bytes)
        flat = arr.reshape(-1).view(np.uint8).data
        lead = chunk_lead(layout.header(op, 1))
        put = self.publisher.put
        for chunk in range(layout.chunks):
            start, end = layout.span(chunk)
            put((rnd, chunk), flat[start:end], lead, view=view)
        return layout

    def _publish_shared(
        self, rnd: int, arr: np.ndarray[Any, Any], op: str, arena: SharedArena
    ) -> Layout:
        """Publish ``arr`` as round ``rnd``'s chunks, each copied once into the memory file
        and its Data a reference to it (safe to reuse two rounds on: see shared.py)."""
        if arr.dtype.hasobject:
            raise CollectiveError(f"dtype {arr.dtype}: only numeric arrays travel", self.names.job)
        layout = Layout.of(arr, self.chunk_bytes)
        flat = arr.reshape(-1).view(np.uint8).data
        header = layout.header(op, 1)
        put = self.publisher.put
        for chunk in range(layout.chunks):
            start, end = layout.span(chunk)
            ref = arena.write(rnd, layout, chunk, flat[start:end])
            put((rnd, chunk), b"", chunk_lead({**header, "shm": ref.encode()}))
        return layout

    def _until(self) -> float:
        return asyncio.get_running_loop().time() + self.deadline

    async def fetch(
        self,
        names: Sequence[bytes],
        place: Callable[[int, memoryview], None],
        what: str,
        until: float | None = None,
    ) -> None:
        """Fetch ``names`` with this worker's window and lifetime, by ``until`` (loop time;
        default: the deadline from now); ``place(i, content)`` as each arrives (a view of the
        received packet: place copies what it keeps)."""
        await fetch_many(
            self.ep,
            names,
            place,
            window=self.window,
            lifetime_ms=self.lifetime_ms,
            until=self._until() if until is None else until,
            counters=self.counters,
            what=what,
            check=self.check,
        )

    async def _fetch_sum(
        self, rnd: int, layout: Layout, dest: np.ndarray[Any, Any] | None = None
    ) -> np.ndarray[Any, Any]:
        """The sum of round ``rnd``, each chunk written into its slice of ``dest`` (or of a
        new array) as it arrives."""
        if dest is None:
            out = np.empty(layout.nbytes, dtype=np.uint8)
        else:
            out = dest.reshape(-1).view(np.uint8)
        names = [JobNames.piece(self.names.sum_prefix(), rnd, c) for c in range(layout.chunks)]
        what = f"{self.names.job} round {rnd}"

        def place(chunk: int, content: memoryview) -> None:
            header, part = read_part(content, "the sum", self.maps)
            if header.get("n") != self.size:
                raise CollectiveError(
                    f"{what}: the sum covers {header.get('n')} of {self.size} workers"
                )
            self._place(out, layout, chunk, header, part, "the sum")
            check_parts(((header, part),), ("the sum",), self.maps)

        await self.fetch(names, place, what)
        return out.view(layout.dtype).reshape(layout.shape) if dest is None else dest

    async def _pull_arrays(self, workers: Sequence[str], rnd: int) -> list[np.ndarray[Any, Any]]:
        """Other workers' arrays of round ``rnd``, straight from their names: chunk 0 says the
        layout, then the rest come with the window."""
        until = self._until()
        what = f"{self.names.job} round {rnd}"
        firsts: dict[int, memoryview] = {}
        prefixes = [self.names.worker_prefix(w) for w in workers]
        await self.fetch(
            [JobNames.piece(p, rnd, 0) for p in prefixes], firsts.__setitem__, what, until
        )
        outs: list[np.ndarray[Any, Any]] = []
        layouts: list[Layout] = []
        wanted: list[tuple[int, int]] = []
        for i, w in enumerate(workers):
            header, part = read_part(firsts[i], f"worker {w}")
            layout = Layout.from_header(header)
            layouts.append(layout)
            outs.append(np.empty(layout.nbytes, dtype=np.uint8))
            self._place(outs[i], layout, 0, header, part, f"worker {w}")
            wanted.extend((i, c) for c in range(1, layout.chunks))
        names = [JobNames.piece(prefixes[i], rnd, c) for i, c in wanted]

        def place(k: int, content: memoryview) -> None:
            i, c = wanted[k]
            source = f"worker {workers[i]}"
            self._place(outs[i], layouts[i], c, *read_part(content, source), source)

        await self.fetch(names, place, what, until)
        return [o.view(lay.dtype).reshape(lay.shape) for o, lay in zip(outs, layouts, strict=True)]

    def _place(
        self,
        out: np.ndarray[Any, Any],
        layout: Layout,
        chunk: int,
        header: dict[str, Any],
        part: np.ndarray[Any, Any],
        source: str,
    ) -> None:
        if Layout.from_header(header) != layout:
            raise CollectiveError(f"{source}: chunk {chunk} has another layout than chunk 0")
        start, end = layout.span(chunk)
        if part.nbytes != end - start:
            raise CollectiveError(f"{source}: chunk {chunk} has {part.nbytes} bytes")
        out[start:end] = part.view(np.uint8)
        self.counters["bytes_received"] += end - start
