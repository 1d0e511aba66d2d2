"""Functions the shipped scenarios serve (``icn serve apps.demos.demo_functions``): small models of
what users put behind a name."""

from __future__ import annotations

import asyncio
import collections
import hashlib

from compute.rmi import function


@function(pure=True)
def add(a: float, b: float) -> float:
    """Pure: a repeated call is answered by a content store on the way."""
    return a + b


@function
def word_count(text: str, top: int = 3) -> list[tuple[str, int]]:
    """The ``top`` most frequent words of ``text``."""
    return collections.Counter(text.lower().split()).most_common(top)


@function(pure=True, cpu_bound=True, duration=0.2)
def proof_of_work(data: bytes, zeros: int = 3) -> int:
    """CPU-bound (runs in a worker process): the first nonce whose SHA-256 with ``data`` starts
    with ``zeros`` hex zeros."""
    prefix = "0" * zeros
    nonce = 0
    while not hashlib.sha256(data + nonce.to_bytes(8, "big")).hexdigest().startswith(prefix):
        nonce += 1
    return nonce


@function(duration=5.0)
async def train(seconds: float = 5.0, steps: int = 10) -> dict[str, float]:
    """A long job (default 5 s): answered by a thunk, its result fetched when the estimate says."""
    loss = 1.0
    for _ in range(steps):
        await asyncio.sleep(seconds / steps)
        loss *= 0.7
    return {"steps": steps, "loss": round(loss, 6)}
