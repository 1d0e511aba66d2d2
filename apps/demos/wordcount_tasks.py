"""A MapReduce word count and a Monte Carlo pi as tasks (``icn tasks executor --module
apps.demos.wordcount_tasks``): the shipped scenario ``scenarios/mapreduce.yaml`` and the
examples run them.

The text is generated where it is counted, and built so that every count is known without
counting: in chunk ``i`` of a job, word ``j`` of the vocabulary appears ``scale * (1 + (7i + j)
mod 5)`` times, in an order shuffled by the job's seed.  A caller checks a job's result exactly
(:func:`expected_counts`) at no cost.
"""

from __future__ import annotations

import random
from collections import Counter

from compute.tasks import task

VOCABULARY = [f"w{j:04d}" for j in range(2000)]


def occurrences(index: int, word: int, scale: int) -> int:
    return scale * (1 + (7 * index + word) % 5)


def chunk_text(seed: int, index: int, scale: int) -> str:
    """Chunk ``index`` of job ``seed``: about ``scale`` x 36 kB of words."""
    words = [w for j, w in enumerate(VOCABULARY) for _ in range(occurrences(index, j, scale))]
    random.Random(seed * 1_000_003 + index).shuffle(words)
    return " ".join(words)


@task(deterministic=True)
def count_chunk(seed: int, index: int, scale: int) -> dict[str, int]:
    """The map: the words of one chunk, counted."""
    return dict(Counter(chunk_text(seed, index, scale).split()))


@task(deterministic=True)
def merge_counts(*counts: dict[str, int]) -> dict[str, int]:
    """The reduce: every chunk's counts, summed."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(total)


def expected_counts(chunks: int, scale: int) -> dict[str, int]:
    """What a job of ``chunks`` chunks must answer, whatever its seed."""
    return {
        w: sum(occurrences(i, j, scale) for i in range(chunks)) for j, w in enumerate(VOCABULARY)
    }


@task(deterministic=True)
def pi_hits(seed: int, samples: int) -> int:
    """Monte Carlo: how many of ``samples`` random points of the unit square fall in the
    quarter circle."""
    rng = random.Random(seed)
    rand = rng.random
    return sum(1 for _ in range(samples) if rand() ** 2 + rand() ** 2 <= 1.0)
