"""An executor: runs tasks and hosts actors for any caller, as an RMI server at
``/cfn/node/<id>`` (docs/design.md section 11, "Tasks and actors").

Its functions (called by :mod:`compute.tasks.runtime`, one signed Interest each once a
session is agreed):

- ``run(task, args, refs, result, deterministic)``: fetch the reference arguments by name
  (from its own store, else through the network with a forwarding hint toward a holder), run
  the task in a CPU slot, keep the result as named data ``/cfn/obj/<digest>`` and answer with
  its size (the value too when small and not deterministic) and this executor's load.
  A deterministic result it already holds is not computed again.
- ``actor_new`` / ``actor_call``: an actor's instance, its calls run one at a time in the order
  of their numbers, its state saved after each call and sent back with the answer.
- ``status``: counters, running tasks, actors.

Results are served by name under ``/cfn/obj`` (reached by forwarding hints; no route of their
own), the load under ``/cfn/node/<id>/load`` (fresh for half a second, so a content store answers
the callers in between).  The executor imports only the modules it was started with.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from compute.rmi.functions import FunctionSpec, function, spec_of
from compute.rmi.policy import PolicySpec
from compute.rmi.server import RmiServer, ServerConfig
from compute.rmi.store import BoundedStore
from compute.tasks.declare import ActorClass, RemoteFunction, resolve
from compute.tasks.names import OBJ, check_node_id, load_name, node_prefix, wire_name
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.handlers import Reply
from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import fetch_segments
from icn.errors import IcnError
from icn.security.keys import Identity
from icn.wire import tlv_types as T
from icn.wire.encode import Nacked, make_data
from icn.wire.packet import InterestView
from icn.wire.serialize import pack, unpack

INLINE_RESULT = 4096  # bytes of a packed result sent back in the answer (non-deterministic)
RESULT_FRESHNESS_MS = 3_600_000  # a result never changes under its name
LOAD_FRESHNESS_MS = 500
SEGMENT_SIZE = 8000
FETCH_TIMEOUT = 30.0  # seconds to fetch one reference argument
RECENT_ANSWERS = 64  # actor answers kept per actor for a call sent again
# a task that has taken less than this (seconds) runs on the executor's event loop: the hop to
# a pool thread and back cost more than the task (15 % of an executor's CPU per empty task)
INLINE_TASK = 0.0005


class ArgumentLost(Exception):
    """A reference argument's result could not be fetched from any holder (their message names
    it): the caller runs its lineage again."""


class ExecutorFull(Exception):
    """Not enough free memory (or slots) for the call now: the caller tries another executor."""


class ActorLost(Exception):
    """No such actor here (its executor restarted, or it lives elsewhere)."""


@dataclass
class _Actor:
    obj: Any
    name: str
    seq: int  # the last call applied
    checkpoint: bool
    turn: asyncio.Condition = field(default_factory=asyncio.Condition)
    answers: OrderedDict[int, dict[str, Any]] = field(default_factory=OrderedDict)
    pool: concurrent.futures.ThreadPoolExecutor | None = None


@dataclass
class ExecutorConfig:
    node_id: str
    modules: frozenset[str]
    num_cpus: float = 1.0
    memory: int = 0  # bytes for tasks that ask for memory (0: not limited)
    store_bytes: int = 1 << 30  # results kept, oldest dropped first beyond this
    max_calls: int = 512  # calls in progress before new ones are Nacked (RMI's max_jobs)
    # who may run tasks and actors here (compute.rmi.policy): checked before any argument is
    # fetched or any work starts; "anyone" suits one machine, not a shared network
    authorize: PolicySpec = "anyone"


class Executor:
    """The executor's state over one endpoint; :meth:`start` serves it, :meth:`close` stops."""

    def __init__(self, ep: Endpoint, config: ExecutorConfig, identity: Identity | None = None):
        check_node_id(config.node_id)
        if config.num_cpus <= 0:
            raise IcnError(f"executor {config.node_id}: num_cpus must be > 0")
        self.ep = ep
        self.config = config
        self.prefix = node_prefix(config.node_id)
        self.counters: Counter[str] = Counter()
        self.ran: Counter[str] = Counter()  # runs per task name (a re-execution counts twice)
        self.store: BoundedStore[bytes, SegmentedObject] = BoundedStore(
            "objects", max_entries=1 << 20, max_bytes=config.store_bytes, counters=self.counters
        )
        self._computing: dict[bytes, asyncio.Future[None]] = {}
        # each task's recent run time (seconds, moving average): one that takes less than
        # INLINE_TASK runs on the event loop, not in a pool thread
        self._took: dict[str, float] = {}
        self.actors: dict[str, _Actor] = {}
        self.in_progress = 0
        self.running: dict[int, str] = {}
        self._ids = 0
        self._free_cpus = config.num_cpus
        self._free_memory = config.memory
        self._slot_waiters: list[tuple[float, asyncio.Future[None]]] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, math.ceil(config.num_cpus)), thread_name_prefix="task"
        )
        self.server = RmiServer(
            ep,
            self.prefix,
            self._functions(),
            config=ServerConfig(max_jobs=config.max_calls, inline_budget=0.02),
            identity=identity,
        )
        self._served: list[Any] = []

    # ---- serving ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._served.append(await self.ep.serve(OBJ.rstrip("/"), self._on_object, register=False))
        # (under the executor's own prefix: the one route a node announces)
        self._served.append(
            await self.ep.serve(load_name(self.config.node_id), self._on_load, register=False)
        )
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()
        for served in self._served:
            with contextlib.suppress(IcnError):
                await served.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for actor in self.actors.values():
            if actor.pool is not None:
                actor.pool.shutdown(wait=False, cancel_futures=True)

    def load(self) -> dict[str, Any]:
        return {
            "l": self.in_progress,
            "c": self.config.num_cpus,
            "m": self._free_memory if self.config.memory else 0,
            "M": self.config.memory,
        }

    def _on_load(self, iv: InterestView, reply: Reply) -> None:
        self.counters["load_served"] += 1
        reply(
            make_data(
                iv.name, pack(self.load()), freshness=LOAD_FRESHNESS_MS, signer=self.ep.signer
            )
        )

    def _on_object(self, iv: InterestView, reply: Reply) -> None:
        ends = iv.name_ends
        key = iv.name[: ends[2]] if len(ends) >= 3 else iv.name
        obj = self.store.get(key, time.monotonic())
        if obj is None:
            self.counters["object_unknown"] += 1
            reply(Nacked(iv.wire, T.NACK_NO_ROUTE))  # not here: the asker looks elsewhere
            return
        self.counters["object_segments_served"] += 1
        obj.handler(iv, reply)

    def _keep(self, key: bytes, blob: bytes) -> None:
        obj = SegmentedObject(key, blob, segment_size=SEGMENT_SIZE, freshness=RESULT_FRESHNESS_MS)
        self.store.put(key, obj, time.monotonic(), size=len(blob))

    # ---- slots ---------------------------------------------------------------------------

    async def _take(self, cpus: float, memory: int) -> None:
        if self.config.memory and memory > self.config.memory:
            raise ExecutorFull(
                f"the task needs {memory} bytes; executor {self.config.node_id} has "
                f"{self.config.memory} in all"
            )
        if cpus > self.config.num_cpus:
            raise ExecutorFull(
                f"the task needs {cpus} CPUs; executor {self.config.node_id} has "
                f"{self.config.num_cpus}"
            )
        if self.config.memory and memory > self._free_memory:
            raise ExecutorFull(
                f"the task needs {memory} bytes free; executor {self.config.node_id} has "
                f"{self._free_memory} now"
            )
        self._free_memory -= memory
        if cpus <= 0:
            return
        if not self._slot_waiters and self._free_cpus >= cpus:
            self._free_cpus -= cpus
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_waiters.append((cpus, waiter))
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._give(cpus, 0)
            else:
                self._slot_waiters = [w for w in self._slot_waiters if w[1] is not waiter]
            self._free_memory += memory
            raise

    def _give(self, cpus: float, memory: int) -> None:
        self._free_memory += memory
        self._free_cpus += max(cpus, 0.0)
        while self._slot_waiters and self._free_cpus >= self._slot_waiters[0][0]:
            need, waiter = self._slot_waiters.pop(0)
            if waiter.done():
                continue
            self._free_cpus -= need
            waiter.set_result(None)

    # ---- arguments -----------------------------------------------------------------------

    async def _argument(self, name: str, holders: list[str]) -> Any:
        key = wire_name(name)
        obj = self.store.get(key, time.monotonic())
        if obj is not None:
            self.counters["arg_bytes_local"] += len(obj.content)
            return unpack(obj.content)
        hint = [wire_name(h) for h in holders if h != self.prefix]
        try:
            blob = await fetch_segments(
                self.ep,
                key,
                forwarding_hint=hint or None,
                lifetime_ms=2000,
                retries=1,
                timeout=FETCH_TIMEOUT,
            )
        except IcnError as exc:
            self.counters["arg_lost"] += 1
            raise ArgumentLost(
                f"{name} (held by {', '.join(holders) or 'no one'}): {exc}"
            ) from None
        self.counters["arg_bytes_fetched"] += len(blob)
        self.counters["args_fetched"] += 1
        self._keep(key, blob)  # a second task on it here reads it locally
        return unpack(blob)

    async def _bind(self, blob: bytes, refs: list[list[Any]]) -> tuple[list[Any], dict[str, Any]]:
        args, kwargs = unpack(blob)
        if refs:
            values = await asyncio.gather(
                *(self._argument(r[1], r[2]) for r in refs), return_exceptions=True
            )
            lost = [str(v) for v in values if isinstance(v, ArgumentLost)]
            if lost:  # every one of them, so that the caller rebuilds them all at once
                raise ArgumentLost("; ".join(lost))
            for v in values:
                if isinstance(v, BaseException):
                    raise v
            for ref, value in zip(refs, values, strict=True):
                slot = ref[0]
                if isinstance(slot, int):
                    args[slot] = value
                else:
                    kwargs[slot] = value
        return args, kwargs

    # ---- functions -----------------------------------------------------------------------

    def _functions(self) -> dict[str, FunctionSpec]:
        async def run(
            task: str,
            blob: bytes,
            refs: list[list[Any]],
            result: str,
            deterministic: bool,
            num_cpus: float,
            memory: int,
        ) -> dict[str, Any]:
            key = wire_name(result)
            now = time.monotonic()
            if deterministic:
                pending = self._computing.get(key)
                if pending is not None:
                    await asyncio.shield(pending)
                held = self.store.get(key, now)
                if held is not None:
                    self.counters["reused"] += 1
                    return {"n": len(held.content), "x": False, **self.load()}
            target = resolve(task, self.config.modules)
            if not isinstance(target, RemoteFunction):
                raise TypeError(f"{task} is an actor class: create it with .remote()")
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            if deterministic:
                self._computing[key] = done
            self.in_progress += 1
            self._ids += 1
            ident = self._ids
            thread: asyncio.Future[Any] | None = None  # a task running in a pool thread

            def release(_: object = None) -> None:
                self.running.pop(ident, None)
                self._give(num_cpus, memory)

            def ended(_: object) -> None:
                release()
                self.in_progress -= 1

            try:
                args, kwargs = await self._bind(blob, refs)
                await self._take(num_cpus, memory)
                try:
                    self.running[ident] = task
                    self.ran[task] += 1
                    self.counters["tasks_run"] += 1
                    func = target.func
                    began = time.perf_counter()
                    if asyncio.iscoroutinefunction(func):
                        value = await func(*args, **kwargs)
                        took = time.perf_counter() - began
                    elif self._took.get(task, 1.0) < INLINE_TASK:
                        value = func(*args, **kwargs)  # quicker than the hop to a thread
                        took = time.perf_counter() - began
                    else:
                        thread = asyncio.get_running_loop().run_in_executor(
                            self._pool, _timed, func, args, kwargs
                        )
                        value, took = await asyncio.shield(thread)
                    self._time(task, took)
                except asyncio.CancelledError:
                    if thread is not None and not thread.done():
                        # a thread cannot be stopped: its slot and its load stay taken until
                        # it ends, so that neither this executor nor its callers count on
                        # the CPU it still uses (its result is dropped)
                        self.counters["cancelled_running"] += 1
                        thread.add_done_callback(ended)
                        self.in_progress += 1  # (the finally below takes one off)
                    else:
                        release()
                    raise
                except BaseException:
                    release()
                    raise
                release()
                packed = pack(value)
                self._keep(key, packed)
                answer: dict[str, Any] = {
                    "n": len(packed),
                    "x": True,
                    "t": round(took, 6),
                    **self.load(),
                }
                if not deterministic and len(packed) <= INLINE_RESULT:
                    answer["v"] = packed
                return answer
            finally:
                self.in_progress -= 1
                done.set_result(None)
                if self._computing.get(key) is done:
                    del self._computing[key]

        async def actor_new(
            cls: str,
            blob: bytes,
            refs: list[list[Any]],
            actor_id: str,
            state: bytes | None,
            seq: int,
            checkpoint: bool,
        ) -> dict[str, Any]:
            target = resolve(cls, self.config.modules)
            if not isinstance(target, ActorClass):
                raise TypeError(f"{cls} is not an @actor class")
            if state is not None:
                obj = target.cls.__new__(target.cls)
                restored = unpack(state)
                setter = getattr(obj, "__setstate__", None)
                if setter is not None and not isinstance(obj, type):
                    setter(restored)
                else:
                    obj.__dict__.update(restored)
                self.counters["actors_restored"] += 1
            else:
                args, kwargs = await self._bind(blob, refs)
                obj = target.cls(*args, **kwargs)
            self.actors[actor_id] = _Actor(
                obj,
                cls,
                seq,
                checkpoint,
                pool=concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="actor"
                ),
            )
            self.counters["actors_created"] += 1
            return self.load()

        async def actor_call(
            actor_id: str, method: str, blob: bytes, refs: list[list[Any]], seq: int
        ) -> dict[str, Any]:
            actor = self.actors.get(actor_id)
            if actor is None:
                raise ActorLost(f"actor {actor_id} does not live on {self.config.node_id}")
            if seq <= actor.seq:  # sent again after a lost answer
                old = actor.answers.get(seq)
                if old is not None:
                    return old
                raise ActorLost(f"actor {actor_id}: call {seq} is older than the ones kept")
            try:
                args, kwargs = await self._bind(blob, refs)
                unbound: Exception | None = None
            except Exception as exc:  # its turn must still pass, or every later call waits
                unbound = exc
            self.in_progress += 1
            try:
                async with actor.turn:
                    await actor.turn.wait_for(lambda: actor.seq == seq - 1)
                    if unbound is not None:
                        actor.seq = seq
                        actor.turn.notify_all()
                        raise unbound
                    bound = getattr(actor.obj, method, None)
                    if method.startswith("_") or bound is None or not callable(bound):
                        actor.seq = seq
                        actor.turn.notify_all()
                        raise AttributeError(f"{actor.name} has no method {method!r}")
                    timing = f"{actor.name}.{method}"
                    began = time.perf_counter()
                    try:
                        if asyncio.iscoroutinefunction(bound):
                            value = await bound(*args, **kwargs)
                        elif self._took.get(timing, 1.0) < INLINE_TASK:
                            value = bound(*args, **kwargs)  # quicker than the hop to its thread
                            self._time(timing, time.perf_counter() - began)
                        else:
                            loop = asyncio.get_running_loop()
                            value, took = await loop.run_in_executor(
                                actor.pool, _timed, bound, args, kwargs
                            )
                            self._time(timing, took)
                    finally:
                        actor.seq = seq
                        actor.turn.notify_all()
                    self.counters["actor_calls"] += 1
                    answer: dict[str, Any] = {"v": pack(value), "q": seq, **self.load()}
                    if actor.checkpoint:
                        answer["s"] = self._state_of(actor)
                    actor.answers[seq] = answer
                    if len(actor.answers) > RECENT_ANSWERS:
                        actor.answers.popitem(last=False)
                    return answer
            finally:
                self.in_progress -= 1

        async def status() -> dict[str, Any]:
            return {
                "node": self.config.node_id,
                "modules": sorted(self.config.modules),
                "num_cpus": self.config.num_cpus,
                "memory": self.config.memory,
                "in_progress": self.in_progress,
                "running": sorted(self.running.values()),
                "actors": {k: a.name for k, a in self.actors.items()},
                "ran": dict(self.ran),
                "objects": len(self.store),
                "object_bytes": self.store.bytes,
                "counters": dict(self.counters),
            }

        specs: dict[str, FunctionSpec] = {}
        for f in (run, actor_new, actor_call, status):
            # (status, counters only, answers anyone: `icn tasks status` signs with a key of
            # its own)
            policy = "anyone" if f is status else self.config.authorize
            spec = spec_of(function(authorize=policy)(f))
            assert spec is not None
            specs[spec.name] = spec
        return specs

    def _time(self, what: str, seconds: float) -> None:
        """Learn how long ``what`` (a task, an actor's method) takes: a moving average."""
        old = self._took.get(what)
        self._took[what] = seconds if old is None else old + 0.25 * (seconds - old)

    @staticmethod
    def _state_of(actor: _Actor) -> bytes:
        getter = getattr(actor.obj, "__getstate__", None)
        state = getter() if getter is not None else vars(actor.obj)
        try:
            return pack(state)
        except IcnError as exc:
            raise TypeError(
                f"actor {actor.name}: its state cannot be saved ({exc}); keep its attributes "
                "to plain values, give it __getstate__/__setstate__, or mark it "
                "@actor(checkpoint=False)"
            ) from None


def _timed(func: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, float]:
    """``func(*args, **kwargs)`` in a pool thread, and the seconds it took there (the hop to
    the thread and back left out, so a quick task is known as quick on a loaded machine)."""
    began = time.perf_counter()
    value = func(*args, **kwargs)
    return value, time.perf_counter() - began


async def run_executor(
    config: ExecutorConfig,
    transport: str | None = None,
    *,
    identity: Identity | None = None,
    ready: Any = None,
    stop: asyncio.Event | None = None,
) -> dict[str, int]:
    """Serve an executor until cancelled or ``stop`` is set; returns its counters."""
    ep = await Endpoint.connect(transport)
    executor = Executor(ep, config, identity)
    try:
        await executor.start()
        if ready is not None:
            ready(executor)
        if stop is None:
            await ep.wait_closed()
        else:
            closed = asyncio.ensure_future(ep.wait_closed())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({closed, stopping}, return_when=asyncio.FIRST_COMPLETED)
            closed.cancel()
            stopping.cancel()
        return dict(executor.counters)
    finally:
        await executor.close()
        ep.close()
        await ep.wait_closed()
