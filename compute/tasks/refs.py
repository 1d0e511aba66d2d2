"""References: a task's result by name, and a handle on an actor.

A :class:`TaskRef` *is* its result's name (``/cfn/obj/<digest>``) plus its lineage (the task
and its arguments, reference arguments by their own refs), so whoever holds it can fetch the
result from wherever a copy lives, or run the task again when no copy is left.  It is awaitable
inside a runtime's event loop; ``compute.tasks.get`` reads it from a plain script.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compute.tasks.declare import ActorSpec, TaskSpec
    from compute.tasks.runtime import Runtime


class TaskRef:
    """The name of a task's result, its lineage and, once run, where copies of it live."""

    __slots__ = (
        "_done",
        "_error",
        "_value",
        "args",
        "blob",
        "driver",
        "from_network",
        "holders",
        "kwargs",
        "name",
        "refs",
        "runtime",
        "size",
        "spec",
        "waiters",
    )

    def __init__(
        self,
        runtime: Runtime,
        name: str,
        spec: TaskSpec | None,
        blob: bytes,
        refs: list[tuple[int | str, TaskRef]],
    ) -> None:
        self.runtime = runtime
        self.name = name
        self.spec = spec  # None for an object put by the driver, or an actor call's answer
        self.blob = blob  # the packed arguments, references left out (lineage)
        self.refs = refs  # (position or keyword, reference) of each reference argument
        # prefixes of the executors (or the driver) known to hold a copy: forwarding hints
        self.holders: list[str] = []
        self.size = 0  # bytes of the packed result, once known
        self.from_network = False  # answered by a content store or a pending Interest
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self.waiters: list[asyncio.Future[None]] = []
        self.driver: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        state = "done" if self._done else "pending"
        return f"TaskRef({self.name}, {state})"

    @property
    def done(self) -> bool:
        return self._done

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        self._done = True
        self._value = value
        self._error = error
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def reset(self) -> None:
        """Forget the value (its copies are lost): the next read runs the lineage again."""
        self._done = False
        self._value = None
        self._error = None
        self.holders = []

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def __await__(self) -> Generator[Any, None, Any]:
        return self.runtime.get_async(self).__await__()


class ActorMethod:
    """``handle.method``: ``.remote(...)`` calls it on the actor."""

    __slots__ = ("handle", "method")

    def __init__(self, handle: ActorHandle, method: str) -> None:
        self.handle = handle
        self.method = method

    def remote(self, *args: Any, **kwargs: Any) -> TaskRef:
        return self.handle.runtime.call_actor(self.handle, self.method, args, kwargs)


class ActorHandle:
    """An actor living on an executor: ``handle.method.remote(...)``.  Its state is saved after
    every call (``checkpoint``), so when its executor is lost it starts again on another from
    the last state, and the calls not yet answered are sent there in order."""

    def __init__(self, runtime: Runtime, actor_id: str, spec: ActorSpec, methods: set[str]):
        self.runtime = runtime
        self.actor_id = actor_id
        self.spec = spec
        self.methods = methods
        self.node: str | None = None  # the executor it lives on
        self.seq = 0  # calls made (the next call's number is seq + 1)
        self.state: bytes | None = None  # the last saved state, and the call it followed
        self.state_seq = 0
        self.restarts = 0
        self.ready: asyncio.Future[None] | None = None  # set once it lives somewhere
        self.args_blob = b""
        self.refs: list[tuple[int | str, TaskRef]] = []
        # calls in flight at once: more wait for one to be answered (the executor runs them
        # in order anyway, and a refused one would hold up every later one there)
        self.window: asyncio.Semaphore | None = None

    def __getattr__(self, method: str) -> ActorMethod:
        if method.startswith("_") or method not in self.methods:
            raise AttributeError(
                f"actor {self.spec.name} has no method {method!r} callable remotely"
            )
        return ActorMethod(self, method)

    def __repr__(self) -> str:
        return f"ActorHandle({self.spec.name}, {self.actor_id}, on {self.node})"
