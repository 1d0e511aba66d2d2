"""Running calls: where each function runs, how long it is expected to take, its result.

A job is started after authorization and argument checks.  Coroutines run on the server's
loop; plain functions in a thread pool; ``cpu_bound`` functions in a process pool, so Python
work that holds the GIL does not stall the loop that answers Interests.  Completion estimates
start from the declared ``duration`` and follow an average of observed run times.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import secrets
import traceback
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from compute.rmi.errors import RemoteError
from compute.rmi.functions import FunctionSpec
from icn.wire.signer import Signer

log = logging.getLogger(__name__)

# Weight of the newest run time in the learnt estimate (an exponential moving average).
EWMA_WEIGHT = 0.3
# A job past its estimate is expected within this fraction of its elapsed time.
OVERDUE_FACTOR = 0.25


class Job:
    """One call in progress or finished: ``outcome`` is the value, or a RemoteError."""

    __slots__ = (
        "callbacks",
        "estimate",
        "finished",
        "outcome",
        "signer",
        "spec",
        "started",
        "task",
        "token",
    )

    def __init__(self, spec: FunctionSpec, started: float, estimate: float) -> None:
        self.spec = spec
        self.token = secrets.token_hex(16)  # unguessable: the thunk name is a capability
        self.started = started
        self.estimate = estimate
        self.finished: float | None = None
        self.outcome: Any = None
        self.callbacks: list[Callable[[Job], None]] = []
        # signs what answers the job's result name (a session's HMAC key; None: the server's)
        self.signer: Signer | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        return self.finished is not None

    def eta(self, now: float) -> float:
        """Seconds until the result is expected (0 once done)."""
        if self.finished is not None:
            return 0.0
        left = self.started + self.estimate - now
        if left > 0:
            return left
        return OVERDUE_FACTOR * (now - self.started) + 0.05


class JobRunner:
    """Runs jobs; owns the thread and process pools (created on first use)."""

    def __init__(self, *, max_threads: int = 32, max_processes: int | None = None) -> None:
        self.max_threads = max_threads
        self.max_processes = max_processes or os.cpu_count() or 1
        self.running: dict[str, Job] = {}
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._processes: concurrent.futures.ProcessPoolExecutor | None = None
        self._learnt: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def estimate(self, spec: FunctionSpec) -> float:
        return self._learnt.get(spec.name, spec.duration)

    def create(self, spec: FunctionSpec) -> Job:
        """A job for a call of ``spec``, not started: add its callbacks, then :meth:`run`."""
        job = Job(spec, asyncio.get_running_loop().time(), self.estimate(spec))
        self.running[job.token] = job
        return job

    def run(self, job: Job, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Start ``job`` here and now: it runs until it first waits, as an eager task would
        (Python 3.12's), so a coroutine that returns without waiting is done, its callbacks
        called, when this returns, with no task made and no turn of the loop waited."""
        coro = self._run(job, args, kwargs)
        try:
            waits_for = coro.send(None)
        except StopIteration:
            return
        except BaseException:  # (what a task would have logged: a callback that raised)
            log.exception("job of %s failed in its callbacks", job.spec.name)
            return
        task = job.task = asyncio.get_running_loop().create_task(_go_on(coro, waits_for))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self, spec: FunctionSpec, args: list[Any], kwargs: dict[str, Any]) -> Job:
        job = self.create(spec)
        self.run(job, args, kwargs)
        return job

    async def _run(self, job: Job, args: list[Any], kwargs: dict[str, Any]) -> None:
        spec = job.spec
        loop = asyncio.get_running_loop()
        try:
            if spec.run == "loop":
                job.outcome = await spec.func(*args, **kwargs)
            else:
                pool = self._pool(spec.run == "process")
                job.outcome = await loop.run_in_executor(pool, partial(spec.func, *args, **kwargs))
        except asyncio.CancelledError:
            if job.outcome is None:  # not the caller's cancel (see cancel): the server's close
                job.outcome = RemoteError("Cancelled", "the server shut down during the call")
            raise
        except Exception as exc:
            job.outcome = RemoteError(
                type(exc).__name__, str(exc), spec.name, traceback.format_exc(limit=20)
            )
        finally:
            now = loop.time()
            job.finished = now
            self.running.pop(job.token, None)
            took = now - job.started
            old = self._learnt.get(spec.name)
            self._learnt[spec.name] = took if old is None else old + EWMA_WEIGHT * (took - old)
            for callback in job.callbacks:
                callback(job)
            job.callbacks.clear()

    def cancel(self, token: str) -> Job | None:
        """Stop the running job ``token`` for its caller: a coroutine is cancelled where it
        awaits; work in a thread or a worker process cannot be interrupted, so it is abandoned
        (it runs to its end, and its result is dropped).  The job, or None if none runs."""
        job = self.running.get(token)
        if job is None or job.task is None:
            return None
        job.outcome = RemoteError("Cancelled", "the caller cancelled the call", job.spec.name)
        job.task.cancel()
        return job

    def _pool(self, process: bool) -> concurrent.futures.Executor:
        if process:
            if self._processes is None:
                self._processes = concurrent.futures.ProcessPoolExecutor(self.max_processes)
            return self._processes
        if self._threads is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(
                self.max_threads, thread_name_prefix="rmi"
            )
        return self._threads

    async def close(self) -> None:
        """Cancel what runs on the loop and stop the pools (running threads finish; process
        workers are stopped)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
        if self._processes is not None:
            self._processes.shutdown(wait=False, cancel_futures=True)


async def _go_on(coro: Coroutine[Any, Any, None], waits_for: Any) -> None:
    """Drive ``coro``, started by :meth:`JobRunner.run` and now waiting for ``waits_for``, as
    its own task would have (asyncio's Task step, for the futures and bare yields asyncio's
    awaitables make): wait until the future is done, without reading it, then resume the
    coroutine, which reads the outcome itself (with its traceback: a future gives that only
    once).  A cancellation of this task cancels what the coroutine waits for, as a task's
    does, or is thrown in where it waits when that was done already."""
    loop = asyncio.get_running_loop()
    while True:
        thrown: BaseException | None = None
        if waits_for is None:  # a bare yield (asyncio.sleep(0)): one turn of the loop
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError as exc:
                thrown = exc
        elif getattr(waits_for, "_asyncio_future_blocking", None) is not None:
            waits_for._asyncio_future_blocking = False  # ours to wait for now, as a task's
            while not waits_for.done():
                woken = loop.create_future()
                waits_for.add_done_callback(partial(_wake, woken))
                try:
                    await woken
                except asyncio.CancelledError as exc:
                    if waits_for.done():
                        thrown = exc
                    else:  # cancel it, and wait for it to end (a task may take a while)
                        waits_for.cancel()
        else:
            thrown = RuntimeError(f"a job's coroutine yielded {waits_for!r}, not a future")
        try:
            waits_for = coro.send(None) if thrown is None else coro.throw(thrown)
        except StopIteration:
            return


def _wake(woken: asyncio.Future[None], _done: Any) -> None:
    if not woken.done():
        woken.set_result(None)
