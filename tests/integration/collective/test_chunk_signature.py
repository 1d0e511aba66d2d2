"""Chunks signed with NDN's NullSignature (``signature="null"``): the same bits as with the
default DigestSha256, packets that say SignatureType 200, and a clear error for a wrong name."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from compute.collective import Collective, CollectiveError
from compute.collective.wire import chunk_signer
from icn.wire import tlv_types as T
from icn.wire.packet import parse_data
from icn.wire.signer import NULL_SIGNATURE
from tests.integration.collective.conftest import PLACES, Job


async def test_null_signed_chunks_give_the_same_bits_and_say_so(job: Job) -> None:
    await job.start(aggregator={"signature": "null"}, signature="null", chunk_bytes=4096)
    rng = np.random.default_rng(7)
    arrays = {w: rng.standard_normal(10_000).astype(np.float32) for w in PLACES}
    results = await asyncio.gather(*(c.allreduce(arrays[c.worker], "sum") for c in job.workers))
    expected = job.plan.reference(arrays, "sum").tobytes()
    for got in results:
        assert got.tobytes() == expected
    # what the aggregators published: SignatureType 200, an empty SignatureValue (a worker's
    # chunks are gone once its round is retired: it publishes with the same signer)
    assert all(c.publisher.signer is NULL_SIGNATURE for c in job.workers)
    for node in ("r", "m1"):
        wire = next(iter(job.aggregators[node].publisher._wires.values()))
        blob = wire if isinstance(wire, bytes) else wire.join()
        assert blob.endswith(b"\x16\x03\x1b\x01" + bytes([T.SIG_NULL]) + b"\x17\x00")
        assert parse_data(blob).name


def test_an_unknown_signature_names_the_choices() -> None:
    with pytest.raises(CollectiveError, match=r"use digest .* or null"):
        chunk_signer("sha1", "/ar")


async def test_a_collective_refuses_an_unknown_signature(job: Job) -> None:
    with pytest.raises(CollectiveError, match="signature 'none'"):
        Collective(job.plan, "w0", job.net.endpoint("a"), signature="none")
