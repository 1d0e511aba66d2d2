"""The work of bench/tasks.py, as our tasks and as plain functions Ray and Dask wrap: the
patterns of Ray's own microbenchmark (an empty task, an actor's empty method) and a word count
whose every chunk is generated where it is counted (the same text for every framework)."""

from __future__ import annotations

import pickle
import random
from collections import Counter
from typing import Any

from compute.tasks import actor, task

# a vocabulary of 5,000 made-up words of 3-9 letters, the same in every process
_RNG = random.Random(1729)
VOCAB = [
    "".join(_RNG.choices("abcdefghijklmnopqrstuvwxyz", k=_RNG.randint(3, 9))) for _ in range(5000)
]


def empty_fn() -> None:
    return None


def chunk_text(seed: int, index: int, size: int) -> str:
    """About ``size`` bytes of text, the same for the same (seed, index)."""
    rng = random.Random(seed * 1_000_003 + index)
    words = rng.choices(VOCAB, k=max(1, size // 7))
    return " ".join(words)


def count_fn(seed: int, index: int, size: int) -> dict[str, int]:
    """The words of one chunk, counted (the map)."""
    return dict(Counter(chunk_text(seed, index, size).split()))


def merge_fn(*counts: dict[str, int]) -> dict[str, int]:
    """The counts of every chunk, summed (the reduce)."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(total)


def merge_list_fn(counts: list[dict[str, int]]) -> dict[str, int]:
    """:func:`merge_fn` over one list: Dask's form at its best (``client.submit(merge_fn,
    *futures)`` cost Dask 4.5 s more for 64 counts of 5,000 words than passing the list: its
    graph walks every argument's contents)."""
    return merge_fn(*counts)


def count_pickled_fn(seed: int, index: int, size: int) -> bytes:
    """:func:`count_fn`'s counts pickled: Dask at its best.  Dask moves a dict or list result
    between processes item by item (130 ms for one of 5,000 words here, measured), bytes in one
    piece."""
    return pickle.dumps(count_fn(seed, index, size), protocol=pickle.HIGHEST_PROTOCOL)


def merge_pickled_fn(counts: list[bytes]) -> dict[str, int]:
    return merge_fn(*(pickle.loads(c) for c in counts))


class Holder:
    """Ray's microbenchmark actor: an empty method."""

    def __init__(self) -> None:
        self.calls = 0

    def ping(self) -> None:
        self.calls += 1
        return None


empty = task(empty_fn)
count = task(deterministic=True)(count_fn)
merge = task(deterministic=True)(merge_fn)
HolderActor = actor(Holder)


def expected_total(seed: int, chunks: int, size: int) -> int:
    """Words in the whole text (the check every framework's answer must pass)."""
    return sum(len(chunk_text(seed, i, size).split()) for i in range(chunks))


def describe(counts: dict[str, Any]) -> str:
    return f"{len(counts)} distinct words, {sum(counts.values())} in all"
