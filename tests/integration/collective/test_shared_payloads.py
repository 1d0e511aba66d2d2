"""Chunks in shared memory (``shared=True``): the same bits, refusals instead of wrong sums."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from compute.collective import CollectiveError
from compute.collective.combine import check_parts, read_part
from compute.collective.shared import Ref, SharedArena, SharedMaps
from compute.collective.wire import Layout, chunk_lead
from tests.integration.collective.conftest import Job
from tests.integration.collective.test_allreduce import (
    arrays_for,
    every_case_gives_the_same_bits,
    run_round,
)

ROOT = Path(__file__).resolve().parents[3]


async def test_every_worker_receives_the_same_bits_through_shared_memory(job: Job) -> None:
    await job.start(aggregator={"shared": True}, shared=True, chunk_bytes=4096)
    await every_case_gives_the_same_bits(job, ("sum", "mean", "max"))
    # the bytes went around the packets: a 4 KiB chunk's Data carried a reference only
    root = job.aggregators["r"].counters
    chunks = root["chunks_published"]
    assert chunks > 0 and root["bytes_sent"] / chunks < 512


async def test_in_place_results_and_many_rounds_reuse_the_memory_files(job: Job) -> None:
    await job.start(aggregator={"shared": True}, shared=True, chunk_bytes=8192)
    for rnd in range(6):  # three times round each parity of every memory file
        arrays = arrays_for(np.float32, (50, 300), seed=40 + rnd)
        expected = job.plan.reference(arrays, "sum")
        calls = [c.allreduce(arrays[c.worker], "sum", out=arrays[c.worker]) for c in job.workers]
        results = await asyncio.wait_for(asyncio.gather(*calls), 60)
        for coll, got in zip(job.workers, results, strict=True):
            assert got is arrays[coll.worker]
            assert got.tobytes() == expected.tobytes()


async def test_workers_in_shared_memory_with_aggregators_in_packets(job: Job) -> None:
    # an aggregator reads its children's references whatever its own setting
    await job.start(shared=True, chunk_bytes=4096)
    arrays = arrays_for(np.int64, (3000,), seed=3)
    results = await run_round(job, arrays, "sum")
    assert all(r.tobytes() == job.plan.reference(arrays, "sum").tobytes() for r in results)


def test_ring_mode_and_oversized_chunks_are_refused_naming_the_setting(job: Job) -> None:
    from compute.collective import Collective

    ep: Any = None
    with pytest.raises(CollectiveError, match="shared=True works in mode tree"):
        Collective(job.plan, "w0", ep, mode="ring", shared=True)
    with pytest.raises(CollectiveError, match=r"chunk_bytes 134217728: with shared=True"):
        Collective(job.plan, "w0", ep, shared=True, chunk_bytes=128 << 20)


# ---- the memory files themselves ------------------------------------------------------------

LAYOUT = Layout(np.dtype(np.float32), (4096,), 4096)  # 4 chunks of 1,024 items


def shared_chunk(arena: SharedArena, rnd: int, chunk: int, values: Any) -> bytes:
    payload = np.asarray(values, dtype=np.float32).view(np.uint8).data
    ref = arena.write(rnd, LAYOUT, chunk, payload)
    return chunk_lead({**LAYOUT.header("sum", 1), "shm": ref.encode()})


def test_a_chunk_overwritten_two_rounds_later_is_refused_not_read() -> None:
    arena, maps = SharedArena("test"), SharedMaps()
    try:
        first = shared_chunk(arena, 0, 1, np.full(1024, 1.0))
        header, part = read_part(first, "worker w0", maps)
        assert part.tolist() == [1.0] * 1024
        check_parts([(header, part)], ["worker w0"], maps)  # still round 0's
        shared_chunk(arena, 1, 1, np.full(1024, 2.0))  # the other parity: round 0 untouched
        check_parts([(header, part)], ["worker w0"], maps)
        shared_chunk(arena, 2, 1, np.full(1024, 3.0))  # round 0's place, taken by round 2
        with pytest.raises(CollectiveError, match="round 0's chunk was overwritten"):
            check_parts([(header, part)], ["worker w0"], maps)
        with pytest.raises(CollectiveError, match="round 0's chunk was overwritten"):
            read_part(first, "worker w0", maps)  # asked for too late: refused before reading
    finally:
        maps.close()
        arena.close()


def test_a_forged_or_foreign_reference_is_refused_naming_the_source() -> None:
    arena, maps = SharedArena("test"), SharedMaps()
    try:
        good = shared_chunk(arena, 0, 0, np.zeros(1024))
        header = msgpack.unpackb(good[2:])
        ref = Ref.decode(header["shm"])

        def with_ref(**change: Any) -> bytes:
            values = ref.encode()
            names = ["pid", "fd", "token", "offset", "length", "index", "round"]
            for key, value in change.items():
                values[names.index(key)] = value
            return chunk_lead({**header, "shm": values})

        with pytest.raises(CollectiveError, match="worker w3: its chunk refers to a memory file"):
            read_part(with_ref(token=bytes(16)), "worker w3", maps)
        with pytest.raises(CollectiveError, match="out of its memory file"):
            read_part(with_ref(offset=1 << 40), "worker w3", maps)
        with pytest.raises(CollectiveError, match="malformed chunk"):
            read_part(with_ref(token="not bytes"), "worker w3", maps)
        # a process that is gone (or on another host): the path, and what to do
        gone = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        with pytest.raises(CollectiveError, match=r"needs every member of the job on one host"):
            read_part(with_ref(pid=int(gone.stdout)), "worker w3", maps)
        # an fd that is no memory file (a pipe): refused before it is mapped
        read_end, write_end = os.pipe()
        os.close(write_end)
        try:
            with pytest.raises(CollectiveError, match="not a memory file"):
                read_part(with_ref(pid=os.getpid(), fd=read_end), "worker w3", maps)
        finally:
            os.close(read_end)
        # bytes after a reference are not a chunk either
        with pytest.raises(CollectiveError, match="malformed chunk"):
            read_part(good + b"\x00" * 4, "worker w3", maps)
    finally:
        maps.close()
        arena.close()


def test_another_process_maps_the_file_read_only() -> None:
    arena = SharedArena("test")
    try:
        lead = shared_chunk(arena, 0, 2, np.arange(1024))
        ref = Ref.decode(msgpack.unpackb(lead[2:])["shm"])
        reader = (
            "import numpy as np\n"
            "from compute.collective.shared import Ref, SharedMaps\n"
            f"ref = Ref({ref.pid}, {ref.fd}, {ref.token!r}, {ref.offset}, {ref.length}, "
            f"{ref.index}, {ref.round})\n"
            "view = SharedMaps().view(ref, 'w')\n"
            "print(np.frombuffer(view, np.float32)[:3].tolist(), view.readonly)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", reader],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            cwd=ROOT,
        )
        assert out.stdout.split() == ["[0.0,", "1.0,", "2.0]", "True"]
    finally:
        arena.close()


async def test_a_dead_aggregator_is_bypassed_with_chunks_in_shared_memory(job: Job) -> None:
    await job.start(aggregator={"shared": True, "bypass_after": 1.0}, shared=True)
    arrays = [arrays_for(np.float32, (100, 1000), seed=60 + r) for r in range(2)]
    first = await run_round(job, arrays[0], "sum")
    assert first[0].tobytes() == job.plan.reference(arrays[0], "sum").tobytes()
    m1 = job.aggregators.pop("m1")
    await m1.close()
    m1.ep.close()  # its face and routes go: the root pulls m1's workers' references itself
    second = await run_round(job, arrays[1], "sum")
    expected = job.plan.reference(arrays[1], "sum")
    assert all(r.tobytes() == expected.tobytes() for r in second)
    assert job.aggregators["r"].gone == {"m1"}
    assert job.aggregators["r"].counters["chunks_bypassed"] > 0


async def test_a_child_chunk_that_disagrees_with_its_own_layout_is_refused_not_written(
    job: Job,
) -> None:
    # a child's header says 4 chunks of 4 KiB: chunk 7, or a chunk of 8 KiB, has no place in
    # the aggregator's memory file (written anyway, it would land on another chunk's place)
    from compute.collective import Aggregator

    agg = Aggregator(job.plan, "r", job.net.endpoint("r"), shared=True)
    try:
        header = LAYOUT.header("sum", 1)
        small = (header, np.zeros(1024, dtype=np.float32))
        with pytest.raises(CollectiveError, match="chunk 7: the layout has 4 chunks"):
            agg._out((0, 7), [small])
        big = (header, np.zeros(2048, dtype=np.float32))
        with pytest.raises(CollectiveError, match="chunk 1 of 8192 bytes: the layout's is 4096"):
            agg._out((0, 1), [big])
    finally:
        assert agg.arena is not None
        agg.arena.close()
