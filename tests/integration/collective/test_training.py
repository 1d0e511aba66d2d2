"""The training demo: data-parallel SGD over allreduce in the network equals one process."""

from __future__ import annotations

import asyncio

import numpy as np

from apps.demos import digits_mlp
from tests.integration.collective.conftest import Job


async def test_data_parallel_training_matches_single_process(job: Job) -> None:
    await job.start(lifetime_ms=500)
    job.net.lossy("r", "m2", 0.02, seed=3)  # losses change nothing but the timing
    config = digits_mlp.Config(steps=60, batch_size=64)
    size = len(job.workers)
    weights = await asyncio.wait_for(
        asyncio.gather(
            *(digits_mlp.train_worker(config, c.rank, size, c.allreduce) for c in job.workers)
        ),
        120,
    )
    single = digits_mlp.train_single(config)
    tol = digits_mlp.WEIGHT_TOLERANCE
    for w in weights:
        assert w.tobytes() == weights[0].tobytes()  # every worker holds the same model
        np.testing.assert_allclose(w, single, rtol=tol.rtol, atol=tol.atol)
    # it learnt something, and it is not the untrained model
    assert digits_mlp.accuracy(weights[0], config) > 0.8
    assert digits_mlp.compare(weights[0], digits_mlp.init_weights(config)) > 0.01
    assert job.workers[0].round == config.steps  # one allreduce per step
