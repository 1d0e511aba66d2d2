"""The numeric half of the training demo: determinism, gradients, and data-parallel training
over an in-memory allreduce equal to single-process training."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from apps import digits_mlp as mlp

SHORT = mlp.Config(steps=40)


class MemoryAllreduce:
    """Gathers one array per worker for each call and gives all of them the same reduction."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rounds: dict[int, list[Any]] = {}
        self.done: dict[int, asyncio.Future[Any]] = {}
        self.calls = [0] * n

    def bind(self, worker: int) -> Any:
        async def allreduce(array: Any, op: str) -> Any:
            rnd = self.calls[worker]
            self.calls[worker] += 1
            parts = self.rounds.setdefault(rnd, [None] * self.n)
            fut = self.done.setdefault(rnd, asyncio.get_running_loop().create_future())
            parts[worker] = np.array(array, copy=True)
            if all(p is not None for p in parts):
                total = parts[0].copy()
                for p in parts[1:]:
                    total += p
                fut.set_result(total / self.n if op == "mean" else total)
            return await fut

        return allreduce


async def train_parallel(config: mlp.Config, n: int) -> list[Any]:
    net = MemoryAllreduce(n)
    return list(
        await asyncio.gather(*(mlp.train_worker(config, k, n, net.bind(k)) for k in range(n)))
    )


def test_single_process_training_is_deterministic() -> None:
    a, b = mlp.train_single(SHORT), mlp.train_single(SHORT)
    assert a.tobytes() == b.tobytes()
    other = mlp.train_single(mlp.Config(steps=40, seed=1))
    assert mlp.compare(a, other) > 1e-3


@pytest.mark.parametrize("n", [1, 2, 4, 8])
async def test_data_parallel_matches_single_process(n: int) -> None:
    single = mlp.train_single(SHORT)
    weights = await train_parallel(SHORT, n)
    tol = mlp.WEIGHT_TOLERANCE
    for w in weights:
        assert w.tobytes() == weights[0].tobytes()
        np.testing.assert_allclose(w, single, rtol=tol.rtol, atol=tol.atol)


async def test_a_sum_taken_for_a_mean_is_caught() -> None:
    net = MemoryAllreduce(2)

    def summing(k: int) -> Any:
        inner = net.bind(k)

        async def allreduce(array: Any, op: str) -> Any:
            return await inner(array, "sum")

        return allreduce

    weights = await asyncio.gather(*(mlp.train_worker(SHORT, k, 2, summing(k)) for k in range(2)))
    single = mlp.train_single(SHORT)
    assert mlp.compare(weights[0], single) > mlp.WEIGHT_TOLERANCE.atol * 1e3


def test_batch_must_split_evenly_among_workers() -> None:
    with pytest.raises(ValueError, match="not divisible by 3 workers"):
        mlp.batch_indices(mlp.Config(batch_size=64), 0, 0, 3)
    slices = [mlp.batch_indices(mlp.Config(), 5, k, 4) for k in range(4)]
    assert np.array_equal(np.concatenate(slices), mlp.batch_indices(mlp.Config(), 5))


def test_default_training_learns_the_digits() -> None:
    config = mlp.Config()
    assert mlp.accuracy(mlp.train_single(config), config) > 0.85


def test_gradient_matches_finite_differences() -> None:
    config = mlp.Config(hidden=8)
    data = mlp.load_split(config)
    w = mlp.init_weights(config)
    x, y = data.x_train[:16], data.y_train[:16]
    _, grad = mlp.loss_and_grad(w, x, y, config.hidden)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(w), size=12, replace=False):
        step = np.zeros_like(w)
        step[i] = 1e-6
        up = mlp.loss_and_grad(w + step, x, y, config.hidden)[0]
        down = mlp.loss_and_grad(w - step, x, y, config.hidden)[0]
        assert (up - down) / 2e-6 == pytest.approx(grad[i], rel=1e-4, abs=1e-8)
