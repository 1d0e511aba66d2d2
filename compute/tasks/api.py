"""The short way in: ``init``, ``get``, ``wait``, ``put``, ``cancel``, ``shutdown``.

From a plain script, :func:`init` starts a runtime on an event loop of its own in a background
thread (``.remote(...)`` and these functions hand it their work); inside a running event loop,
``await connect()`` makes one on that loop and ``await ref`` / :func:`get_async` read results.
The first ``.remote(...)`` without either calls :func:`init` with its defaults.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar, overload

from compute.tasks import current
from compute.tasks.errors import GetTimeout
from compute.tasks.refs import TaskRef
from compute.tasks.runtime import Runtime
from icn.security.keys import Identity

T = TypeVar("T")
START_WAIT = 30.0  # seconds init gives the connection and the first executor

_lock = threading.Lock()
_thread: threading.Thread | None = None


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def init(
    transport: str | None = None, *, identity: Identity | None = None, wait: float = 10.0
) -> Runtime:
    """Connect this process to the task platform (once; later calls return the same runtime):
    the forwarder at ``transport`` (default: NDN_CLIENT_TRANSPORT, client.conf, NFD's socket),
    waiting up to ``wait`` seconds for an executor.  NoExecutors if none appears."""
    global _thread
    with _lock:
        if current.runtime is not None:
            return current.runtime
        loop = _new_loop()
        started: asyncio.Future[Runtime] | None = None
        thread = threading.Thread(target=_serve, args=(loop,), name="icn-tasks", daemon=True)
        thread.start()
        started_f = asyncio.run_coroutine_threadsafe(
            Runtime.connect(transport, identity=identity, wait=wait), loop
        )
        try:
            runtime = started_f.result(timeout=wait + START_WAIT)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            raise
        del started
        current.runtime, _thread = runtime, thread
        return runtime


async def connect(
    transport: str | None = None, *, identity: Identity | None = None, wait: float = 10.0
) -> Runtime:
    """:func:`init` for code already in an event loop: the runtime lives on that loop and
    becomes the current one (``.remote(...)`` uses it)."""
    runtime = await Runtime.connect(transport, identity=identity, wait=wait)
    current.runtime = runtime
    return runtime


def current_runtime() -> Runtime:
    """The runtime ``.remote(...)`` submits to: the one :func:`init` or :func:`connect` made,
    else one made by :func:`init` with its defaults (its ``counters`` say what it did:
    ``from_network``, ``reexecuted``, ``arguments_rebuilt``...)."""
    return current.current_runtime()


current.make_default = init


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def _blocking(coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
    runtime = current_runtime()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError(
            "compute.tasks.get/wait would block the running event loop: use "
            "`await ref`, `await compute.tasks.get_async(...)` there"
        )
    future = asyncio.run_coroutine_threadsafe(coro, runtime.loop)
    try:
        return future.result(timeout=None if timeout is None else timeout + 5.0)
    except TimeoutError:
        future.cancel()
        raise GetTimeout(f"no answer within {timeout} s") from None
    except BaseException:
        future.cancel()
        raise


@overload
def get(refs: TaskRef, timeout: float | None = None) -> Any: ...


@overload
def get(refs: list[TaskRef], timeout: float | None = None) -> list[Any]: ...


def get(refs: TaskRef | list[TaskRef], timeout: float | None = None) -> Any:
    """The value of a reference, or of each in a list (in order), waiting for their calls.
    Raises the call's TaskError, TaskLost, or GetTimeout after ``timeout`` seconds."""
    return _blocking(get_async(refs, timeout), timeout)


async def get_async(refs: TaskRef | list[TaskRef], timeout: float | None = None) -> Any:
    """:func:`get` inside the runtime's event loop (``await ref`` for one reference)."""
    runtime = current_runtime()
    if isinstance(refs, TaskRef):
        return await runtime.get_async(refs, timeout)
    async with asyncio.timeout(timeout):
        return list(await asyncio.gather(*(runtime.get_async(r) for r in refs)))


def wait(
    refs: list[TaskRef], num_returns: int = 1, timeout: float | None = None
) -> tuple[list[TaskRef], list[TaskRef]]:
    """The first ``num_returns`` references whose calls have ended (values not fetched), and
    the rest; fewer when ``timeout`` passes first."""
    return _blocking(current_runtime().wait_async(refs, num_returns, timeout), timeout)


def put(value: Any) -> TaskRef:
    """Keep ``value`` in this process as named data; pass its reference to tasks."""
    return current_runtime().put(value)


def cancel(ref: TaskRef) -> None:
    """Stop the call behind ``ref``; reading it then raises TaskError ("cancelled")."""
    current_runtime().cancel(ref)


def shutdown() -> None:
    """Close :func:`init`'s runtime and stop its thread (results stay on the executors)."""
    global _thread
    with _lock:
        runtime, thread = current.runtime, _thread
        current.runtime = _thread = None
    if runtime is None:
        return
    if thread is None:  # connect()'s: its loop is the caller's
        return
    done = asyncio.run_coroutine_threadsafe(runtime.close(), runtime.loop)
    try:
        done.result(timeout=5)
    except Exception:
        done.cancel()
    runtime.loop.call_soon_threadsafe(runtime.loop.stop)
    thread.join(5)


atexit.register(shutdown)
