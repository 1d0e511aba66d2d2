"""A job's coroutine runs at once, until it first waits (compute/rmi/jobs.py): one that
returns without waiting is done before ``run`` returns, with no task; one that waits goes on
as its own task would have, outcomes, tracebacks and cancellation included."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

import pytest

from compute.rmi import function
from compute.rmi.errors import RemoteError
from compute.rmi.functions import FunctionSpec, spec_of
from compute.rmi.jobs import Job, JobRunner
from tests.virtual_time import virtual_time


@pytest.fixture
async def runner() -> AsyncIterator[JobRunner]:
    r = JobRunner()
    yield r
    await r.close()


def spec(func: Callable[..., Any]) -> FunctionSpec:
    s = spec_of(func)
    assert s is not None
    return s


async def outcome_of(job: Job, timeout: float = 5.0) -> Any:
    if job.done:
        return job.outcome
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    job.callbacks.append(lambda j: done.set_result(j.outcome))
    return await asyncio.wait_for(done, timeout)


async def test_a_coroutine_that_does_not_wait_is_done_when_run_returns(runner: JobRunner) -> None:
    @function
    async def add(a: int, b: int) -> int:
        return a + b

    job = runner.create(spec(add))
    seen: list[Any] = []
    job.callbacks.append(lambda j: seen.append(j.outcome))
    runner.run(job, [2, 3], {})
    assert seen == [5] and job.done and job.task is None
    assert job.token not in runner.running


async def test_a_coroutine_that_waits_goes_on_as_its_task_would(runner: JobRunner) -> None:
    @function
    async def steps(x: int) -> int:
        loop = asyncio.get_running_loop()
        x = await loop.run_in_executor(None, lambda: x + 1)
        await asyncio.sleep(0)  # a bare yield
        await asyncio.sleep(0.01)
        return await asyncio.create_task(asyncio.sleep(0.01, result=x * 10))

    job = runner.start(spec(steps), [4], {})
    assert not job.done and job.task is not None
    assert await outcome_of(job) == 50


async def test_errors_keep_the_functions_own_frames(runner: JobRunner) -> None:
    @function
    async def fails_later() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("bad later")

    @function
    def fails_in_a_thread() -> None:
        raise KeyError("in the pool")

    for func, kind, frame in (
        (fails_later, "ValueError", "fails_later"),
        (fails_in_a_thread, "KeyError", "fails_in_a_thread"),
    ):
        outcome = await outcome_of(runner.start(spec(func), [], {}))
        assert isinstance(outcome, RemoteError) and outcome.remote_type == kind
        assert frame in outcome.remote_traceback


@virtual_time
async def test_a_cancelled_job_sees_cancellation_where_it_waits() -> None:
    # on a virtual clock: how long the job takes to stop is its own doing, not the CPU's
    cleaned: list[str] = []

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # takes a while to stop: its waiter waits for it
            cleaned.append("inner task")
            raise

    @function
    async def long_job(inner: bool) -> None:
        try:
            if inner:
                await asyncio.create_task(slow_to_stop())
            else:
                await asyncio.sleep(30)
        except asyncio.CancelledError:
            cleaned.append("job")
            raise

    runner = JobRunner()
    loop = asyncio.get_running_loop()
    try:
        for inner in (False, True):
            cleaned.clear()
            job = runner.start(spec(long_job), [inner], {})
            await asyncio.sleep(0.05)  # (virtual: all that was ready ran, the inner task too)
            assert not job.done and cleaned == []
            asked = loop.time()
            assert runner.cancel(job.token) is job
            outcome = await outcome_of(job)
            # at once, or once the inner task it waits for has stopped: never its 30 s
            assert loop.time() - asked == pytest.approx(0.05 if inner else 0.0, abs=1e-6)
            assert isinstance(outcome, RemoteError) and outcome.remote_type == "Cancelled"
            assert cleaned == (["inner task", "job"] if inner else ["job"])
    finally:
        await runner.close()


async def test_a_coroutine_that_yields_no_future_fails_as_under_a_task(runner: JobRunner) -> None:
    class Odd:
        def __await__(self) -> Generator[Any, None, None]:
            yield 42

    @function
    async def odd() -> None:
        await asyncio.sleep(0.01)
        await Odd()

    outcome = await outcome_of(runner.start(spec(odd), [], {}))
    assert isinstance(outcome, RemoteError) and outcome.remote_type == "RuntimeError"


async def test_a_callback_that_raises_at_once_is_logged_not_raised(
    runner: JobRunner, caplog: pytest.LogCaptureFixture
) -> None:
    @function
    async def quick() -> int:
        return 1

    def bad_callback(j: Job) -> None:
        raise RuntimeError("callback bug")

    job = runner.create(spec(quick))
    job.callbacks.append(bad_callback)
    with caplog.at_level(logging.ERROR):
        runner.run(job, [], {})  # must not raise into the server's Interest handler
    assert "failed in its callbacks" in caplog.text
