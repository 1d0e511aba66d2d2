"""The work bench/tasks.py gives every framework: the same text for the same chunk, counts that
add up to the words generated, and Dask's pickled form equal to the plain one."""

from __future__ import annotations

from bench import tasks_funcs as f


def test_the_word_count_pieces_agree() -> None:
    size = 5_000
    assert f.chunk_text(7, 3, size) == f.chunk_text(7, 3, size) != f.chunk_text(7, 4, size)
    counts = [f.count_fn(7, i, size) for i in range(4)]
    total = f.merge_fn(*counts)
    assert sum(total.values()) == f.expected_total(7, 4, size)
    assert f.merge_list_fn(counts) == total
    assert f.merge_pickled_fn([f.count_pickled_fn(7, i, size) for i in range(4)]) == total
    assert f.count.spec.deterministic and f.merge.spec.name == "bench.tasks_funcs:merge_fn"
