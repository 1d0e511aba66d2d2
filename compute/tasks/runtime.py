"""The caller's side of the task platform: submit calls, place them, follow them, read results.

A :class:`Runtime` is an RMI client on one connection to the local forwarder.  It finds the
executors by their routes (``/cfn/node/<id>`` in the forwarder's FIB), reads their load
advertisements once a second, and drives each call to completion:

1. a deterministic call first asks the network for its result by name, without a hint: a
   content store on the way, or another caller's Interest still pending for it, answers
   (counted as ``from_network``); with no copy the forwarder Nacks at once (no route);
2. it waits for its reference arguments' calls, then picks an executor
   (:mod:`compute.tasks.placement`: the holder of its largest input if it has room, else the
   least loaded), and calls ``run`` there;
3. a full executor (Nack, or not enough memory) is passed over and the next one tried; a lost
   one (no answer, no route) too, and the call runs again elsewhere from its lineage (counted
   as ``reexecuted``); a reference argument whose every copy was lost is rebuilt first.

Results stay where they were computed; ``get`` fetches one by name with a hint toward its
holder (small non-deterministic results come back in the answer).  No state here is needed by
anyone else: a result outlives this driver, and its name is all another caller needs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from compute.rmi.client import Client
from compute.rmi.errors import (
    Overloaded,
    ProtocolError,
    RemoteError,
    ResultLost,
    RmiError,
    ServerUnavailable,
    Timeout,
)
from compute.tasks.declare import ActorSpec, TaskSpec
from compute.tasks.errors import GetTimeout, NoExecutors, TaskError, TaskLost
from compute.tasks.names import (
    NODE,
    driver_prefix,
    lineage_digest,
    load_name,
    node_of,
    node_prefix,
    object_name,
    wire_name,
)
from compute.tasks.placement import ExecutorState, Placement
from compute.tasks.refs import ActorHandle, TaskRef
from icn.dataplane.endpoint import Endpoint, Served
from icn.dataplane.handlers import Reply
from icn.dataplane.mgmt_client import status
from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import data_content, fetch_segments
from icn.errors import EncodeError, IcnError, InterestNack, InterestTimeout
from icn.security.keys import Identity
from icn.wire import tlv_types as T
from icn.wire.encode import Nacked
from icn.wire.packet import InterestView
from icn.wire.serialize import pack, unpack

REFRESH = 0.5  # seconds between looks at the executors and their loads
LOAD_LIFETIME_MS = 500  # a load read unanswered this long counts as a silence
SUSPECT_AFTER = 2  # silences in a row before an executor's calls run elsewhere
PROBE_LIFETIME_MS = 500  # a result asked of the network before running it
FETCH_TIMEOUT = 60.0  # seconds to fetch one result
CALL_TIMEOUT = 7 * 24 * 3600.0  # a task may run long; a lost executor is noticed by its polls
MAX_WAITING_FOR_ROOM = 3600.0  # seconds a call waits for an executor with room
ROOM_RECHECK = 0.5  # seconds a call in line waits before looking again by itself
ACTOR_WINDOW = 32  # calls of one actor in flight at once
BUSY_PAUSE = 0.02  # seconds before a refused actor call is sent again
_REMOTE = object()  # a settled reference whose value is held elsewhere


_NEVER = ExecutorState("")  # (an executor never heard of: not lost)


def holder_nodes(ref: TaskRef) -> list[str]:
    """The executors (ids) holding a copy of ``ref``'s result (a driver is not one)."""
    return [n for h in ref.holders if (n := node_of(h)) is not None]


def _drop(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


class Runtime:
    """Tasks and actors through one connection; made by :meth:`connect` (in a running loop)
    or :func:`compute.tasks.init` (a loop of its own in a background thread)."""

    def __init__(self, ep: Endpoint, client: Client) -> None:
        self.ep = ep
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.placement = Placement()
        self.counters: Counter[str] = Counter()
        self.driver_id = "d" + secrets.token_hex(8)
        self._serial = itertools.count(1)
        self._objects: dict[bytes, SegmentedObject] = {}  # put by this driver, served by name
        self._in_line: collections.deque[asyncio.Future[None]] = collections.deque()
        self._refresher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._restarting: dict[str, asyncio.Future[None]] = {}
        self._served: list[Served] = []
        self._silent: Counter[str] = Counter()  # load reads unanswered in a row, per executor
        # calls in flight per executor, cancelled when it is suspected (then _given_up)
        self._calls_at: dict[str, set[asyncio.Task[Any]]] = {}
        self._given_up: set[asyncio.Task[Any]] = set()

    @classmethod
    async def connect(
        cls,
        transport: str | None = None,
        *,
        identity: Identity | None = None,
        wait: float = 10.0,
    ) -> Runtime:
        """A runtime on a new connection to the forwarder at ``transport`` (default: as every
        program finds it), once at least one executor is known (waits up to ``wait`` seconds
        for one to register; NoExecutors after)."""
        ep = await Endpoint.connect(transport)
        try:
            return await cls.on(ep, identity=identity, wait=wait)
        except BaseException:
            ep.close()
            await ep.wait_closed()
            raise

    @classmethod
    async def on(
        cls, ep: Endpoint, *, identity: Identity | None = None, wait: float = 10.0
    ) -> Runtime:
        """A runtime on an endpoint the caller made (a scenario's); see :meth:`connect`."""
        client = Client(ep, identity=identity, timeout=CALL_TIMEOUT)
        runtime = cls(ep, client)
        runtime._served.append(await ep.serve(driver_prefix(runtime.driver_id), runtime._on_object))
        runtime._served.append(await ep.serve("/cfn/obj", runtime._on_object, register=False))
        await runtime._first_executors(wait)
        runtime._refresher = runtime.loop.create_task(runtime._refresh_forever())
        return runtime

    async def close(self, *, close_endpoint: bool = True) -> None:
        """Stop following calls (results stay on the executors); close the connection too
        unless it was the caller's (``close_endpoint=False``)."""
        if self._refresher is not None:
            self._refresher.cancel()
        for task in list(self._tasks):
            task.cancel()
        for served in self._served:
            with contextlib.suppress(IcnError):
                await served.close()
        if close_endpoint:
            self.client.close()
            await self.ep.wait_closed()

    # ---- executors -----------------------------------------------------------------------

    async def _first_executors(self, wait: float) -> None:
        deadline = self.loop.time() + wait
        while True:
            await self.refresh()
            if self.placement.executors:
                return
            if self.loop.time() >= deadline:
                raise NoExecutors(
                    f"no executor registered under {NODE} at the forwarder ({self.ep.uri}) "
                    f"within {wait} s: start one with `icn tasks executor --id NAME --module "
                    "MODULE`"
                )
            await asyncio.sleep(0.1)

    async def refresh(self) -> None:
        """Look at the forwarder's routes for executors, and at each one's load."""
        fib = await status(self.ep, "fib/list")
        present = {n for e in fib if (n := node_of(str(e.get("name", "")))) is not None}
        if not present:
            return
        for node in present:
            self.placement.know(node)
        for node in set(self.placement.executors) - present:  # its route withdrawn
            self._suspect(node)
        self.placement.forget_missing(present)
        results = await asyncio.gather(
            *(self._read_load(n) for n in present), return_exceptions=True
        )
        for node, result in zip(present, results, strict=True):
            if isinstance(result, BaseException):
                self._silent[node] += 1
                if self._silent[node] >= SUSPECT_AFTER:
                    self._suspect(node)
            else:
                self._silent[node] = 0
        for _ in range(len(self._in_line)):
            self._room_freed()

    async def _read_load(self, node: str) -> None:
        dv = await self.ep.express(
            load_name(node),
            must_be_fresh=True,
            lifetime_ms=LOAD_LIFETIME_MS,
            timeout=LOAD_LIFETIME_MS / 1000 * 1.5,
        )
        info = unpack(data_content(dv))
        self.placement.report(
            node,
            int(info["l"]),
            float(info["c"]),
            int(info["m"]),
            time.monotonic(),
            int(info.get("M", 0)),
        )

    def _suspect(self, node: str) -> None:
        """``node`` stopped answering its load (twice in a row) or lost its route: its calls
        in flight run again elsewhere now, rather than when their polls expire.  An actor is
        not moved on suspicion (two live copies of its state would diverge): only when one of
        its calls fails."""
        if not self.placement.executors.get(node, _NEVER).lost:
            self.counters["executors_suspected"] += 1
        self.placement.lost(node, time.monotonic())
        for call in self._calls_at.pop(node, set()):
            self._given_up.add(call)
            call.cancel()

    async def _invoke_at(self, node: str, function: str, args: tuple[Any, ...]) -> Any:
        """A call of an executor's function, given up on (ServerUnavailable) as soon as the
        executor is suspected of being gone (:meth:`_suspect` cancels it)."""
        call = self.loop.create_task(self.client.invoke(node_prefix(node) + function, args))
        calls = self._calls_at.get(node)
        if calls is None:
            calls = self._calls_at[node] = set()
        calls.add(call)
        try:
            return await call
        except asyncio.CancelledError:
            if call in self._given_up:
                raise ServerUnavailable(f"{node} stopped answering", function) from None
            call.cancel()
            raise
        finally:
            calls.discard(call)
            self._given_up.discard(call)

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(REFRESH)
            with contextlib.suppress(IcnError, OSError):
                await self.refresh()

    def _report(self, node: str, answer: dict[str, Any]) -> None:
        self.placement.report(
            node,
            int(answer.get("l", 0)),
            float(answer.get("c", 1)),
            int(answer.get("m", 0)),
            time.monotonic(),
            int(answer.get("M", 0)),
        )

    async def _choose(
        self,
        what: str,
        cpus: float,
        memory: int,
        inputs: list[tuple[list[str], int]],
        avoid: frozenset[str] = frozenset(),
    ) -> str:
        """An executor for a call: at once when one has room, else the call waits in line
        (first come, first placed) and is woken when a call ends or loads are read again."""
        deadline = self.loop.time() + MAX_WAITING_FOR_ROOM
        while True:
            why = self.placement.infeasible(cpus, memory)
            if why is not None:  # no load will ever change: fail now, not in an hour
                raise TaskError(what, f"no executor can run it: {why}")
            if not self._in_line:
                node = self._pick(cpus, memory, inputs, avoid)
                if node is not None:
                    return node
            if self.loop.time() >= deadline:
                raise NoExecutors(
                    f"no executor could take a call needing {cpus} CPUs and "
                    f"{memory} bytes within {MAX_WAITING_FOR_ROOM} s"
                )
            turn: asyncio.Future[None] = self.loop.create_future()
            self._in_line.append(turn)
            try:
                async with asyncio.timeout(ROOM_RECHECK):
                    await turn
            except TimeoutError:
                pass
            finally:
                with contextlib.suppress(ValueError):
                    self._in_line.remove(turn)
            node = self._pick(cpus, memory, inputs, avoid)
            if node is not None:
                return node

    def _pick(
        self, cpus: float, memory: int, inputs: list[tuple[list[str], int]], avoid: frozenset[str]
    ) -> str | None:
        """The placement's choice, another executor than those that just failed or refused
        this call when one can take it, else one of them once it can (a call needing what
        only one executor has waited for ever when that one had refused it once)."""
        now = time.monotonic()
        node = self.placement.choose(cpus, memory, inputs, now, avoid)
        if node is None and avoid:
            node = self.placement.choose(cpus, memory, inputs, now)
        return node

    def _room_freed(self) -> None:
        """A call ended (or loads were read): the first call in line looks again."""
        while self._in_line:
            turn = self._in_line.popleft()
            if not turn.done():
                turn.set_result(None)
                return

    # ---- submitting ----------------------------------------------------------------------

    def _pack(
        self, what: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[bytes, list[tuple[int | str, TaskRef]]]:
        refs: list[tuple[int | str, TaskRef]] = []
        plain = list(args)
        for i, a in enumerate(plain):
            if isinstance(a, TaskRef):
                refs.append((i, a))
                plain[i] = None
        named = dict(sorted(kwargs.items()))
        for k, v in named.items():
            if isinstance(v, TaskRef):
                refs.append((k, v))
                named[k] = None
        try:
            return pack([plain, named]), refs
        except EncodeError as exc:
            raise TaskError(
                what,
                f"{exc} (arguments travel as msgpack values; a reference may be passed only as "
                "a whole argument, not inside a list or dict)",
            ) from None

    def _fresh(self) -> str:
        """A result name no other call makes: this driver's random id and a serial number (a
        system random per call cost the driver 10 % of an empty task's CPU)."""
        return f"{self.driver_id}x{next(self._serial):x}"

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_drop)
        return task

    def _on_loop(self, fn: Any, *args: Any) -> None:
        if threading.get_ident() == self.thread:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def submit(self, spec: TaskSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TaskRef:
        """Start a call of the task ``spec``; its reference at once (any thread)."""
        blob, refs = self._pack(spec.name, args, kwargs)
        if spec.deterministic:
            digest = lineage_digest(spec.name, blob, [r.name for _, r in refs])
        else:
            digest = self._fresh()
        ref = TaskRef(self, object_name(digest), spec, blob, refs)
        self.counters["submitted"] += 1
        self._on_loop(self._start, ref)
        return ref

    def _start(self, ref: TaskRef) -> None:
        if ref.driver is None or ref.driver.done():
            ref.driver = self._spawn(self._drive(ref))

    async def _drive(self, ref: TaskRef) -> None:
        try:
            await self._run(ref)
        except asyncio.CancelledError:
            if not ref.done:
                ref.settle(error=TaskError(ref.spec.name if ref.spec else ref.name, "cancelled"))
            raise
        except TaskError as exc:
            ref.settle(error=exc)
        except IcnError as exc:
            ref.settle(error=TaskLost(f"{ref.spec.name if ref.spec else ref.name}: {exc}"))

    async def _run(self, ref: TaskRef) -> None:
        spec = ref.spec
        assert spec is not None
        if spec.deterministic and await self._probe(ref):
            return
        for _, arg in ref.refs:  # the arguments' calls first (their errors are this one's)
            await self._ready(arg)
        retries = 0
        avoid: frozenset[str] = frozenset()
        while True:
            inputs = [(holder_nodes(arg), arg.size) for _, arg in ref.refs]
            node = await self._choose(spec.name, spec.num_cpus, spec.memory, inputs, avoid)
            state = self.placement.executors.get(node)
            slots = [[slot, arg.name, arg.holders, arg.size] for slot, arg in ref.refs]
            if state is not None:
                state.inflight += 1
            try:
                answer = await self._invoke_at(
                    node,
                    "/run",
                    (
                        spec.name,
                        ref.blob,
                        slots,
                        ref.name,
                        spec.deterministic,
                        spec.num_cpus,
                        spec.memory,
                    ),
                )
            except Overloaded:
                self.placement.full(node, time.monotonic())
                self.counters["passed_full"] += 1
                continue
            except RemoteError as exc:
                if exc.remote_type == "ExecutorFull":
                    self.placement.full(node, time.monotonic())
                    self.counters["passed_full"] += 1
                    avoid = avoid | {node}
                    continue
                if exc.remote_type == "ArgumentLost":
                    # (the executor names every argument it could not fetch)
                    lost = [arg for _, arg in ref.refs if arg.name in exc.message]
                    retries += 1
                    if retries > spec.max_retries or not lost:
                        raise TaskLost(f"{spec.name}: arguments lost: {exc.message}") from None
                    for arg in lost:
                        self.counters["arguments_rebuilt"] += 1
                        arg.reset()
                        self._start(arg)
                    for arg in lost:
                        await self._ready(arg)
                    continue
                raise TaskError(
                    spec.name, exc.message, exc.remote_type, exc.remote_traceback
                ) from None
            except (ServerUnavailable, Timeout, ResultLost, ProtocolError) as exc:
                self.placement.lost(node, time.monotonic())
                retries += 1
                self.counters["reexecuted"] += 1
                if retries > spec.max_retries:
                    raise TaskLost(
                        f"{spec.name}: {retries} executors failed it, the last {node}: {exc}"
                    ) from None
                avoid = avoid | {node}
                continue
            except RmiError as exc:
                raise TaskError(spec.name, str(exc)) from None
            finally:
                if state is not None:
                    state.inflight -= 1
                self._room_freed()
            self._report(node, answer)
            if "t" in answer:
                self.placement.ran(node, float(answer["t"]))
            self.counters["executed" if answer.get("x") else "reused_at_executor"] += 1
            ref.holders = [node_prefix(node)]
            ref.size = int(answer.get("n", 0))
            inline = answer.get("v")
            ref.settle(_REMOTE if inline is None else unpack(inline))
            return

    async def _probe(self, ref: TaskRef) -> bool:
        """The result of a deterministic call from the network (a content store, or a pending
        Interest of another caller), if it has it."""
        self.counters["probes"] += 1
        try:
            blob = await fetch_segments(
                self.ep,
                wire_name(ref.name),
                lifetime_ms=PROBE_LIFETIME_MS,
                retries=0,
                timeout=FETCH_TIMEOUT,
            )
        except (InterestNack, InterestTimeout):
            return False
        self.counters["from_network"] += 1
        ref.from_network = True
        ref.size = len(blob)
        ref.settle(unpack(blob))
        return True

    async def _ready(self, ref: TaskRef) -> None:
        """Wait until the call behind ``ref`` has ended (not for its value to be here)."""
        if ref.done:
            return
        if ref.spec is not None and (ref.driver is None or ref.driver.done()):
            self._start(ref)
        waiter: asyncio.Future[None] = self.loop.create_future()
        ref.waiters.append(waiter)
        await waiter

    # ---- reading -------------------------------------------------------------------------

    async def get_async(self, ref: TaskRef, timeout: float | None = None) -> Any:
        """The value of ``ref`` (waiting for its call, then fetching it from its holder)."""
        try:
            async with asyncio.timeout(timeout):
                for _ in range(1 + (ref.spec.max_retries if ref.spec else 0)):
                    await self._ready(ref)
                    value = ref.result()
                    if value is not _REMOTE:
                        return value
                    try:
                        return await self._fetch(ref)
                    except (InterestNack, InterestTimeout) as exc:
                        if ref.spec is None:
                            raise TaskLost(f"{ref.name}: no copy left ({exc})") from None
                        self.counters["results_rebuilt"] += 1
                        ref.reset()
                raise TaskLost(f"{ref.name}: lost again after every rebuild")
        except TimeoutError:
            raise GetTimeout(f"{ref.name}: not ready within {timeout} s") from None

    async def _fetch(self, ref: TaskRef) -> Any:
        hint = [wire_name(h) for h in ref.holders]
        blob = await fetch_segments(
            self.ep,
            wire_name(ref.name),
            forwarding_hint=hint or None,
            retries=1,
            lifetime_ms=2000,
            timeout=FETCH_TIMEOUT,
        )
        self.counters["bytes_fetched"] += len(blob)
        value = unpack(blob)
        ref.settle(value)
        return value

    async def wait_async(
        self, refs: list[TaskRef], num_returns: int = 1, timeout: float | None = None
    ) -> tuple[list[TaskRef], list[TaskRef]]:
        """The first ``num_returns`` of ``refs`` whose calls have ended, and the others."""
        if num_returns > len(refs):
            raise ValueError(f"num_returns {num_returns} > {len(refs)} references")
        pending = {asyncio.ensure_future(self._ready(r)): r for r in refs if not r.done}
        try:
            async with asyncio.timeout(timeout):
                while sum(r.done for r in refs) < num_returns and pending:
                    done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for d in done:
                        pending.pop(d)
        except TimeoutError:
            pass
        finally:
            for f in pending:
                f.cancel()
        ready = [r for r in refs if r.done][:num_returns]
        chosen = set(map(id, ready))
        return ready, [r for r in refs if id(r) not in chosen]

    def cancel(self, ref: TaskRef) -> None:
        """Stop the call behind ``ref`` (its executor is told when it has started there)."""

        def stop() -> None:
            if ref.driver is not None and not ref.driver.done():
                ref.driver.cancel()

        self._on_loop(stop)

    # ---- objects put by this driver -------------------------------------------------------

    def put(self, value: Any) -> TaskRef:
        """Keep ``value`` here as named data; its reference may be passed to tasks (an executor
        fetches it by name, with a hint toward this driver) or read back with ``get``."""
        blob = pack(value)
        ref = TaskRef(self, object_name(self._fresh()), None, b"", [])
        ref.holders = [driver_prefix(self.driver_id)]
        ref.size = len(blob)
        key = wire_name(ref.name)
        self._on_loop(self._keep, key, blob)
        ref.settle(value)
        self.counters["put"] += 1
        return ref

    def _keep(self, key: bytes, blob: bytes) -> None:
        self._objects[key] = SegmentedObject(key, blob, freshness=3_600_000)

    def _on_object(self, iv: InterestView, reply: Reply) -> None:
        ends = iv.name_ends
        obj = self._objects.get(iv.name[: ends[2]] if len(ends) >= 3 else iv.name)
        if obj is None:
            reply(Nacked(iv.wire, T.NACK_NO_ROUTE))
            return
        obj.handler(iv, reply)

    def free(self, refs: Iterable[TaskRef]) -> None:
        """Stop serving objects this driver put (their names answer no more from here)."""
        keys = [wire_name(r.name) for r in refs]
        self._on_loop(lambda: [self._objects.pop(k, None) for k in keys])

    # ---- actors --------------------------------------------------------------------------

    def create_actor(
        self, spec: ActorSpec, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ActorHandle:
        methods = {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}
        handle = ActorHandle(self, "a" + secrets.token_hex(8), spec, methods)
        handle.args_blob, handle.refs = self._pack(spec.name, args, kwargs)
        self.counters["actors"] += 1

        def begin() -> None:
            handle.ready = self.loop.create_future()
            handle.window = asyncio.Semaphore(ACTOR_WINDOW)
            self._spawn(self._place_actor(handle, frozenset()))

        self._on_loop(begin)
        return handle

    async def _place_actor(self, handle: ActorHandle, avoid: frozenset[str]) -> None:
        assert handle.ready is not None
        try:
            for _, arg in handle.refs:
                await self._ready(arg)
            spec = handle.spec
            tries = 0
            while True:
                node = await self._choose(spec.name, spec.num_cpus, spec.memory, [], avoid)
                slots = [[s, a.name, a.holders, a.size] for s, a in handle.refs]
                try:
                    answer = await self.client.invoke(
                        node_prefix(node) + "/actor_new",
                        (
                            spec.name,
                            handle.args_blob,
                            slots,
                            handle.actor_id,
                            handle.state,
                            handle.state_seq,
                            spec.checkpoint,
                        ),
                    )
                except (ServerUnavailable, Timeout, ResultLost, Overloaded) as exc:
                    tries += 1
                    self.placement.lost(node, time.monotonic())
                    avoid = avoid | {node}
                    if tries > spec.max_restarts:
                        raise TaskLost(f"actor {spec.name}: no executor took it ({exc})") from None
                    continue
                except RemoteError as exc:
                    raise TaskError(
                        spec.name, exc.message, exc.remote_type, exc.remote_traceback
                    ) from None
                except RmiError as exc:  # refused (unauthorized, unknown...): not retried
                    raise TaskError(spec.name, str(exc)) from None
                self._report(node, answer)
                handle.node = node
                if not handle.ready.done():
                    handle.ready.set_result(None)
                return
        except BaseException as exc:
            if not handle.ready.done():
                handle.ready.set_exception(
                    exc
                    if isinstance(exc, IcnError)
                    else TaskLost(f"actor {handle.spec.name}: {exc}")
                )
            raise

    def call_actor(
        self, handle: ActorHandle, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> TaskRef:
        blob, refs = self._pack(f"{handle.spec.name}.{method}", args, kwargs)
        ref = TaskRef(self, object_name(self._fresh()), None, blob, refs)
        handle.seq += 1
        seq = handle.seq
        self._on_loop(lambda: self._spawn(self._drive_call(handle, ref, method, seq)))
        return ref

    async def _drive_call(self, handle: ActorHandle, ref: TaskRef, method: str, seq: int) -> None:
        what = f"{handle.spec.name}.{method}"
        try:
            assert handle.window is not None
            # the window is taken in the calls' order before their arguments are waited for:
            # taken after, a call waiting for an argument could find it filled by later calls,
            # which its actor runs only after it
            async with handle.window:
                for _, arg in ref.refs:
                    await self._ready(arg)
                slots = [[s, a.name, a.holders, a.size] for s, a in ref.refs]
                answer = await self._actor_call(handle, method, ref, slots, seq)
            self._report(handle.node or "", answer)
            state = answer.get("s")
            if state is not None and int(answer.get("q", 0)) > handle.state_seq:
                handle.state, handle.state_seq = state, int(answer["q"])
            self.counters["actor_calls"] += 1
            ref.settle(unpack(answer["v"]))
        except TaskError as exc:
            ref.settle(error=exc)
        except IcnError as exc:
            ref.settle(error=TaskLost(f"{what}: {exc}"))

    async def _actor_call(
        self, handle: ActorHandle, method: str, ref: TaskRef, slots: list[Any], seq: int
    ) -> dict[str, Any]:
        what = f"{handle.spec.name}.{method}"
        while True:
            assert handle.ready is not None
            await asyncio.shield(handle.ready)
            node = handle.node
            assert node is not None
            try:
                answer: dict[str, Any] = await self.client.invoke(
                    node_prefix(node) + "/actor_call",
                    (handle.actor_id, method, ref.blob, slots, seq),
                )
            except Overloaded:  # sent again: every later call waits for this one there
                self.counters["actor_calls_refused"] += 1
                await asyncio.sleep(BUSY_PAUSE)
                continue
            except (ServerUnavailable, Timeout, ResultLost) as exc:
                await self._restart(handle, node, exc)
                continue
            except RemoteError as exc:
                if exc.remote_type == "ActorLost":
                    await self._restart(handle, node, exc)
                    continue
                raise TaskError(what, exc.message, exc.remote_type, exc.remote_traceback) from None
            return answer

    async def _restart(self, handle: ActorHandle, failed: str, why: Exception) -> None:
        """Start the actor again elsewhere from its last saved state (one restart at a time,
        whichever of its calls noticed first)."""
        if handle.node != failed:  # already moved by another call
            return
        going = self._restarting.get(handle.actor_id)
        if going is not None:
            await asyncio.shield(going)
            return
        done: asyncio.Future[None] = self.loop.create_future()
        self._restarting[handle.actor_id] = done
        try:
            handle.restarts += 1
            if handle.restarts > handle.spec.max_restarts:
                raise TaskLost(
                    f"actor {handle.spec.name}: lost {handle.restarts} times, the last on "
                    f"{failed}: {why}"
                )
            if not handle.spec.checkpoint:
                raise TaskLost(
                    f"actor {handle.spec.name}: lost on {failed} and not checkpointed "
                    "(@actor(checkpoint=False)): {why}"
                )
            self.placement.lost(failed, time.monotonic())
            self.counters["actor_restarts"] += 1
            handle.node = None
            handle.ready = self.loop.create_future()
            await self._place_actor(handle, frozenset({failed}))
        finally:
            del self._restarting[handle.actor_id]
            done.set_result(None)
