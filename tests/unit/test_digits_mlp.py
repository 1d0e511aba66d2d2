"""apps/demos/digits_mlp: determinism, the batch schedule, data-parallel equivalence over an
in-memory allreduce, the gradient, and accuracy (no sockets)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import numpy as np
import pytest

from apps.demos import digits_mlp
from apps.demos.digits_mlp import (
    WEIGHT_TOLERANCE,
    Allreduce,
    Config,
    FloatArray,
    accuracy,
    batch_indices,
    compare,
    init_weights,
    layers,
    load_split,
    loss_and_grad,
    n_params,
    steps_per_epoch,
    train_single,
    train_worker,
)

_UFUNCS = {"sum": np.add, "mean": np.add, "max": np.maximum, "min": np.minimum}


class InMemoryAllreduce:
    """N workers in one loop: round r completes when all N have contributed; everyone gets the
    reduction folded in worker order (the mean divides the sum by N), as their own copy."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: dict[int, dict[int, FloatArray]] = {}
        self._results: dict[int, asyncio.Future[np.ndarray[Any, Any]]] = {}
        self._next = [0] * n

    @property
    def rounds(self) -> int:
        return len(self._results)

    def handle(self, worker: int) -> Allreduce:
        async def allreduce(array: FloatArray, op: str) -> np.ndarray[Any, Any]:
            rnd = self._next[worker]
            self._next[worker] += 1
            parts = self.parts.setdefault(rnd, {})
            parts[worker] = array.copy()
            result = self._results.setdefault(rnd, asyncio.get_running_loop().create_future())
            if len(parts) == self.n:
                acc = parts[0].copy()
                for k in range(1, self.n):
                    _UFUNCS[op](acc, parts[k], out=acc)
                result.set_result(acc / self.n if op == "mean" else acc)
            return (await result).copy()

        return allreduce


async def _train_parallel(config: Config, n: int) -> tuple[list[FloatArray], InMemoryAllreduce]:
    fake = InMemoryAllreduce(n)
    weights = await asyncio.gather(*(train_worker(config, k, n, fake.handle(k)) for k in range(n)))
    return list(weights), fake


# ---- single process --------------------------------------------------------------------------


def test_single_training_is_deterministic_and_follows_the_seed() -> None:
    a = train_single(Config(seed=3))
    b = train_single(Config(seed=3))
    c = train_single(Config(seed=4))
    assert a.shape == (n_params(Config().hidden),) and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    assert compare(a, c) > 1e-3


def test_training_learns_the_held_out_digits() -> None:
    config = Config()
    assert accuracy(init_weights(config), config) < 0.3
    assert accuracy(train_single(config), config) > 0.85


def test_split_is_scaled_and_disjoint() -> None:
    data = load_split(Config())
    assert data.x_train.dtype == np.float64
    assert data.x_train.min() == 0.0 and data.x_train.max() == 1.0
    assert len(data.y_train) + len(data.y_test) == 1797
    train_rows = {row.tobytes() for row in data.x_train}
    overlap = sum(row.tobytes() in train_rows for row in data.x_test)
    assert overlap < 10  # a handful of digits are pixel-identical duplicates in the data set


def test_the_digits_read_from_scikit_learns_file_are_load_digits_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sklearn.datasets import load_digits  # type: ignore[import-untyped]

    want = load_digits()
    pixels, labels = digits_mlp._digits()
    assert np.array_equal(pixels, want.data) and pixels.dtype == want.data.dtype
    assert np.array_equal(labels, want.target) and labels.dtype == want.target.dtype
    # no file where it is looked for: load_digits itself
    monkeypatch.setattr(digits_mlp.importlib.util, "find_spec", lambda name: None)
    pixels, labels = digits_mlp._digits()
    assert np.array_equal(pixels, want.data) and np.array_equal(labels, want.target)


def test_without_scikit_learn_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(digits_mlp.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # (None in sys.modules: ImportError)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"scikit-learn.*pip install 'icn-net\[examples\]'"):
        digits_mlp._digits()


# ---- schedule ----------------------------------------------------------------------------------


def test_worker_slices_make_up_the_global_batch() -> None:
    config = Config()
    spe = steps_per_epoch(config)
    for step in (0, 1, spe, 5 * spe + 3):
        whole = batch_indices(config, step)
        assert len(whole) == config.batch_size
        np.testing.assert_array_equal(whole, batch_indices(config, step))
        for n in (2, 4, 8):
            slices = [batch_indices(config, step, k, n) for k in range(n)]
            np.testing.assert_array_equal(np.concatenate(slices), whole)


def test_schedule_visits_each_example_at_most_once_per_epoch_and_reshuffles() -> None:
    config = Config()
    spe = steps_per_epoch(config)
    epoch0 = np.concatenate([batch_indices(config, s) for s in range(spe)])
    epoch1 = np.concatenate([batch_indices(config, s) for s in range(spe, 2 * spe)])
    assert len(np.unique(epoch0)) == len(epoch0) == spe * config.batch_size
    assert not np.array_equal(epoch0, epoch1)
    assert not np.array_equal(batch_indices(config, 0), batch_indices(Config(seed=1), 0))


async def test_batch_not_divisible_by_workers_is_a_clear_error() -> None:
    config = Config(batch_size=64)
    with pytest.raises(ValueError, match="batch_size 64 is not divisible by 3 workers"):
        batch_indices(config, 0, 0, 3)
    fake = InMemoryAllreduce(3)
    with pytest.raises(ValueError, match="not divisible by 3 workers"):
        await train_worker(config, 0, 3, fake.handle(0))
    assert fake.rounds == 0
    with pytest.raises(ValueError, match="worker_index"):
        batch_indices(config, 0, 4, 4)


# ---- data parallel -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 4, 8])
async def test_data_parallel_matches_single_process(n: int) -> None:
    config = Config()
    single = train_single(config)
    workers, fake = await _train_parallel(config, n)

    assert fake.rounds == config.steps
    for w in workers[1:]:
        np.testing.assert_array_equal(w, workers[0])
    np.testing.assert_allclose(
        workers[0], single, rtol=WEIGHT_TOLERANCE.rtol, atol=WEIGHT_TOLERANCE.atol
    )
    if n == 1:
        # one worker takes the same arithmetic path as train_single: x / 1 is exact
        np.testing.assert_array_equal(workers[0], single)
    else:
        # each worker contributes its own slice, not the whole batch
        first = fake.parts[0]
        assert compare(first[0], first[1]) > 1e-6


async def test_tolerance_catches_a_sum_taken_for_the_mean() -> None:
    config = Config(steps=20)
    fake = InMemoryAllreduce(2)

    def summing(worker: int) -> Allreduce:
        inner = fake.handle(worker)

        async def allreduce(array: FloatArray, op: str) -> np.ndarray[Any, Any]:
            return await inner(array, "sum")

        return allreduce

    wrong = await asyncio.gather(*(train_worker(config, k, 2, summing(k)) for k in range(2)))
    assert compare(wrong[0], train_single(config)) > 1e3 * WEIGHT_TOLERANCE.atol


async def test_allreduce_of_the_wrong_shape_is_rejected() -> None:
    async def truncating(array: FloatArray, op: str) -> FloatArray:
        return array[:-1]

    with pytest.raises(ValueError, match="allreduce returned shape"):
        await train_worker(Config(steps=1), 0, 1, truncating)


# ---- the gradient ------------------------------------------------------------------------------


def test_gradient_matches_finite_differences() -> None:
    config = Config(hidden=8)
    rng = np.random.default_rng(7)
    # nonzero biases, so their gradients are exercised away from the initial point
    weights = init_weights(config) + rng.normal(0.0, 0.1, n_params(config.hidden))
    data = load_split(config)
    x, y = data.x_train[:16], data.y_train[:16]
    _, grad = loss_and_grad(weights, x, y, config.hidden)

    flat_index = np.arange(len(weights))
    blocks = layers(flat_index.astype(np.float64), config.hidden)
    probes = [int(i) for block in blocks for i in rng.choice(block.ravel(), 3, replace=False)]
    eps = 1e-6
    for i in probes:
        up, down = weights.copy(), weights.copy()
        up[i] += eps
        down[i] -= eps
        numeric = (
            loss_and_grad(up, x, y, config.hidden)[0] - loss_and_grad(down, x, y, config.hidden)[0]
        ) / (2 * eps)
        assert grad[i] == pytest.approx(numeric, rel=1e-5, abs=1e-8), f"parameter {i}"
    assert max(abs(grad[i]) for i in probes) > 1e-3  # the probes are not all trivially zero
