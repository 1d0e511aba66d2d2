"""torch.distributed backend ``icn``: DistributedDataParallel over named data.

    import torch.distributed as dist
    dist.init_process_group(backend="icn")        # env:// (torchrun), file://, or a store
    model = torch.nn.parallel.DistributedDataParallel(model)

With the project installed, ``import torch`` registers the backend (an entry point in torch's
``torch.backends`` group); ``import apps.torch_backend`` does it too where entry points are off
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``).  Each rank is a worker of a collective job
(``compute.collective``): its tensors are published as named chunks and the sums come back from
aggregators in the network.  Where the network is, by environment (read when the group is made):

- ``ICN_TORCH_PLAN``: a plan file (JSON, ``Plan.to_dict()``); rank r is the plan's r-th worker,
  each rank uses the forwarder of ``NDN_CLIENT_TRANSPORT`` (or client.conf), and the plan's
  aggregators run in the forwarders (``apps.collective_entries:aggregator``, as in
  ``scenarios/ddp.yaml``).
  Chunks default to 8192 bytes, one packet on any link.
- nothing: rank 0 starts a forwarder with the job's aggregator in its process
  (``apps.collective_host``) and every rank joins it over a Unix socket; chunks of 4 MiB, their
  bytes passed in shared memory (the packets refer to them: ``compute/collective/shared.py``).
  The ranks must then share the machine (the error says so otherwise).

``ICN_TORCH_CHUNK`` (bytes) and ``ICN_TORCH_WINDOW`` (chunks in flight) override the defaults.
The group's ``timeout`` bounds every operation: a rank that died makes the others' operations
fail naming it (``DistBackendError``), not hang.

The collectives run on one asyncio loop in a thread of each rank; torch's calls return work
objects at once (their futures complete from that loop), so DDP's bucket hooks overlap the
backward pass as with gloo.  Every rank makes the same calls in the same order, as torch
requires: each call takes the next round of the job when it is made.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Work
from torch.distributed import ReduceOp

from compute.collective import DEFAULT_CHUNK, SHARED_CHUNK, Collective, Plan
from icn.dataplane.client_conf import ENV_VAR, resolve_transport
from icn.dataplane.endpoint import Endpoint

log = logging.getLogger(__name__)

BACKEND = "icn"  # as apps.torch_entry registers it
PLAN_ENV = "ICN_TORCH_PLAN"
CHUNK_ENV = "ICN_TORCH_CHUNK"
WINDOW_ENV = "ICN_TORCH_WINDOW"
ROOT = "agg"  # the co-located aggregator's name in the flat plan
HOST_KEY = "icn/host"
JOB_KEY = "icn/job"
DONE_KEY = "icn/done"

# a list, not a dict: the options' ReduceOp equals a RedOpType but does not hash like one
_OPS: list[tuple[Any, str]] = [
    (ReduceOp.SUM, "sum"),
    (ReduceOp.AVG, "mean"),
    (ReduceOp.MAX, "max"),
    (ReduceOp.MIN, "min"),
    (ReduceOp.PRODUCT, "prod"),
]


class IcnBackendError(dist.DistBackendError):
    """What a rank sees when a collective fails (a dead rank, a lost forwarder, a timeout)."""


def register() -> None:
    """Make ``init_process_group(backend="icn")`` work (idempotent; ``import torch`` does it
    through the entry point, ``apps.torch_entry``)."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, create, devices=["cpu"])


def create(store: Any, rank: int, size: int, timeout: timedelta) -> IcnProcessGroup:
    """The backend's creator (torch calls it from ``init_process_group``)."""
    if dist.is_initialized():
        raise ValueError(
            "backend icn: sub-groups (dist.new_group) are not supported; make them with "
            "backend='gloo' (e.g. dist.new_group(ranks, backend='gloo'))"
        )
    return IcnProcessGroup(store, rank, size, timeout)


register()


# ---- tensors ---------------------------------------------------------------------------------


def _array(t: torch.Tensor, what: str) -> np.ndarray[Any, Any]:
    """A numpy view of CPU tensor ``t`` (shares its memory, strides included)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"backend icn: {what}: a torch.Tensor, not {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(
            f"backend icn: {what} is on {t.device}; it moves CPU tensors only: pass "
            f"tensor.cpu(), or use backend='nccl' or 'gloo' for {t.device.type} tensors"
        )
    try:
        return t.detach().numpy()
    except TypeError:
        raise TypeError(
            f"backend icn: {what} has dtype {t.dtype}, which numpy has no type for; cast it "
            "(e.g. tensor.float()) or use backend='gloo'"
        ) from None


def _op(opts: Any, dtype: torch.dtype) -> str:
    op = next((name for kind, name in _OPS if opts.reduceOp == kind), None)
    if op is None:
        raise ValueError(
            f"backend icn: reduce op {opts.reduceOp} is not supported; it has SUM, AVG, MAX, "
            "MIN and PRODUCT (bitwise ops: use backend='gloo')"
        )
    if op == "mean" and (dtype.is_complex or not dtype.is_floating_point):
        raise ValueError(
            f"backend icn: AVG of a {dtype} tensor; reduce with SUM and divide, or use a float "
            "tensor"
        )
    return op


def _single(tensors: list[torch.Tensor], what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise ValueError(f"backend icn: {what} takes one tensor per rank, got {len(tensors)}")
    return tensors[0]


def _into(dest: torch.Tensor, src: np.ndarray[Any, Any]) -> None:
    """``src`` written into ``dest`` unless it already is ``dest``'s memory."""
    view = _array(dest, "output")
    if not np.shares_memory(view, src):
        view[...] = src.reshape(view.shape)


# ---- the loop thread and the work objects ----------------------------------------------------


class _LoopThread:
    """One asyncio loop (uvloop when installed, as the forwarder) in a daemon thread."""

    def __init__(self) -> None:
        try:
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:
            self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="icn-torch", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


def _failure(exc: BaseException, what: str) -> IcnBackendError:
    if isinstance(exc, IcnBackendError):
        return exc
    return IcnBackendError(f"backend icn: {what} failed: {exc}")


class IcnWork(Work):
    """The work of one collective: ``wait()`` blocks until it is done (raising what failed),
    ``get_future()`` completes with its result (DDP chains its bucket hooks on it)."""

    def __init__(
        self,
        loop: _LoopThread,
        body: Callable[[], Coroutine[Any, Any, Any]],
        result: Any,
        what: str,
    ) -> None:
        super().__init__()
        self._what = what
        self._future: torch.futures.Future[Any] = torch.futures.Future()
        self._fut = loop.submit(self._settle(body, result))

    async def _settle(self, body: Callable[[], Coroutine[Any, Any, Any]], result: Any) -> None:
        # the torch future is settled before the work counts as done: a wait() that returned
        # finds its value there (DDP reads it right after)
        try:
            await body()
        except BaseException as exc:
            self._future.set_exception(_failure(exc, self._what))
            raise
        self._future.set_result(result)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        seconds = timeout.total_seconds() if timeout else None
        try:
            self._fut.result(seconds or None)
        except concurrent.futures.TimeoutError:
            raise IcnBackendError(
                f"backend icn: {self._what} not done within {seconds:g} s"
            ) from None
        except BaseException as exc:
            raise _failure(exc, self._what) from exc
        return True

    def is_completed(self) -> bool:
        return self._fut.done()

    def get_future(self) -> torch.futures.Future[Any]:
        return self._future


# ---- where the network is --------------------------------------------------------------------


@dataclass
class _Join:
    """What a rank needs to join the job: its plan, worker, forwarder and chunking."""

    plan: Plan
    transport: str
    chunk: int
    window: int
    # chunks' signature: DigestSha256 on network links; none over the Unix socket of the
    # co-located forwarder, whose transport keeps the bytes intact (a third of a rank's CPU
    # went to hashing its chunks)
    signature: str = "digest"
    # chunks in shared memory (compute/collective/shared.py): every rank on rank 0's host
    shared: bool = False


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: must be a whole number of bytes or chunks") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r}: must be positive")
    return value


def _plan_from_env(path: str, size: int) -> Plan:
    try:
        plan = Plan.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{PLAN_ENV}={path}: {exc}") from None
    if len(plan.workers) != size:
        raise ValueError(
            f"{PLAN_ENV}={path}: the plan has {len(plan.workers)} workers and the group "
            f"{size} ranks; give a plan with one worker per rank (rank r is workers[r])"
        )
    return plan


class _Host:
    """The forwarder and aggregator rank 0 starts when no network is configured."""

    def __init__(self, plan: Plan, timeout: float) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="icn-torch-"))
        self.sock = self.dir / "fwd.sock"
        plan_path = self.dir / "plan.json"
        plan_path.write_text(json.dumps(plan.to_dict()))
        argv = [sys.executable, "-m", "apps.collective_host", "--unix", str(self.sock)]
        # a dead rank is named by the aggregator before the ranks' own deadline passes
        argv += ["--plan", str(plan_path), "--member-timeout", f"{timeout * 0.8:g}"]
        argv += ["--signature", "null", "--payloads", "shared", "--remove-dir", str(self.dir)]
        self.log = open(self.dir / "host.log", "wb")  # noqa: SIM115 (closed by stop)
        root = str(Path(__file__).resolve().parents[1])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        }
        # stdin is a pipe only this process holds: the host exits when this rank does
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env
        )
        self._wait_ready(min(timeout, 60.0))

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc.stdout is not None
        box: list[bytes] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not box or box[0].strip() != b"ready":
            self.stop()
            why = (self.dir / "host.log").read_text(errors="replace")[-2000:]
            raise IcnBackendError(
                f"backend icn: rank 0's forwarder did not start within {timeout:g} s:\n{why}"
            )

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # the host's cue to stop
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _rendezvous(store: Any, rank: int, size: int, timeout: float) -> tuple[_Join, _Host | None]:
    window = _env_int(WINDOW_ENV, 8)
    path = os.environ.get(PLAN_ENV)
    if path:
        plan = _plan_from_env(path, size)
        # every rank must have been given the same job: rank 0's name is compared
        if rank == 0:
            store.set(JOB_KEY, plan.job)
        elif (job := store.get(JOB_KEY).decode()) != plan.job:
            raise ValueError(
                f"{PLAN_ENV}={path}: job {plan.job}, rank 0's is {job}; give every rank the "
                "same plan"
            )
        transport = resolve_transport(None)
        return _Join(plan, transport, _env_int(CHUNK_ENV, DEFAULT_CHUNK), window), None
    host: _Host | None = None
    if rank == 0:
        job = f"/torch/{secrets.token_hex(4)}"
        plan = Plan.flat(job, [str(r) for r in range(size)], root=ROOT)
        host = _Host(plan, timeout)
        info = {"job": job, "unix": str(host.sock), "hostname": socket.gethostname()}
        store.set(HOST_KEY, json.dumps(info))
    else:
        info = json.loads(store.get(HOST_KEY))
        if info["hostname"] != socket.gethostname():
            raise ValueError(
                f"backend icn: rank 0 runs on {info['hostname']} and rank {rank} on "
                f"{socket.gethostname()}: with ranks on several machines give each a forwarder "
                f"({ENV_VAR}) and the job's plan ({PLAN_ENV}); see "
                "docs/tutorials/allreduce-ddp.md"
            )
        plan = Plan.flat(info["job"], [str(r) for r in range(size)], root=ROOT)
    transport = f"unix://{info['unix']}"
    chunk = _env_int(CHUNK_ENV, SHARED_CHUNK)
    return _Join(plan, transport, chunk, window, "null", shared=True), host


# ---- the process group -----------------------------------------------------------------------


class IcnProcessGroup(dist.ProcessGroup):
    """A torch ProcessGroup whose collectives are ``compute.collective`` rounds."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        # the Python group's constructor (torch's stubs know only the C++ one, with a store)
        super().__init__(rank, size)  # type: ignore[call-arg]
        self._store = store
        self._timeout = timeout.total_seconds()
        self._closed = False
        join, self._host = _rendezvous(store, rank, size, self._timeout)
        self.plan = join.plan
        self.worker = join.plan.workers[rank]
        self._loop = _LoopThread()
        try:
            self.coll: Collective = self._loop.submit(self._open(join)).result(self._timeout)
        except BaseException as exc:
            self._loop.stop()
            if self._host is not None:
                self._host.stop()
            raise _failure(exc, "joining the job") from exc
        atexit.register(self.shutdown)  # a script that never calls destroy_process_group

    async def _open(self, join: _Join) -> Collective:
        ep = await Endpoint.connect(join.transport)
        coll = Collective(
            join.plan,
            self.worker,
            ep,
            chunk_bytes=join.chunk,
            window=join.window,
            deadline=self._timeout,
            signature=join.signature,
            shared=join.shared,
        )
        await coll.start()
        return coll

    def getBackendName(self) -> str:
        return BACKEND

    def _run(self, what: str, result: Any, coro: Callable[[], Coroutine[Any, Any, Any]]) -> IcnWork:
        if self._closed:
            raise IcnBackendError(f"backend icn: {what} after the group was destroyed")
        return IcnWork(self._loop, coro, result, what)

    # ---- collectives (torch's signatures) ----------------------------------------------------

    def allreduce(self, tensors: list[torch.Tensor], opts: Any) -> IcnWork:  # type: ignore[override]
        t = _single(tensors, "allreduce")
        arr = _array(t, "allreduce's tensor")
        op = _op(opts, t.dtype)
        coll = self.coll

        async def go() -> None:
            if arr.flags.c_contiguous:
                await coll.allreduce(arr, op, out=arr)  # in place, as torch's all_reduce
            else:
                _into(t, await coll.allreduce(arr, op))

        return self._run("allreduce", tensors, go)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any) -> IcnWork:  # type: ignore[override]
        t = _single(tensors, "broadcast")
        arr = _array(t, "broadcast's tensor")
        root = self.plan.workers[opts.rootRank]
        coll = self.coll
        mine = self.worker == root

        async def go() -> None:
            got = await coll.broadcast(arr if mine else None, root)
            if not mine:
                _into(t, got)

        return self._run("broadcast", tensors, go)

    def allgather(  # type: ignore[override]
        self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any
    ) -> IcnWork:
        t = _single(inputs, "allgather")
        outs = _single(outputs, "allgather's output list")  # type: ignore[arg-type]
        if len(outs) != self.size():
            raise ValueError(
                f"backend icn: allgather needs {self.size()} output tensors, got {len(outs)}"
            )
        arr = _array(t, "allgather's tensor")
        coll = self.coll

        async def go() -> None:
            for dest, got in zip(outs, await coll.allgather(arr), strict=True):
                _into(dest, got)

        return self._run("allgather", outputs, go)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> IcnWork:  # type: ignore[override]
        arr = _array(input, "all_gather_into_tensor's input")
        out = _array(output, "all_gather_into_tensor's output")
        if out.size != arr.size * self.size():
            raise ValueError(
                f"backend icn: all_gather_into_tensor's output has {out.size} elements; it "
                f"needs world size x input = {arr.size * self.size()}"
            )
        coll = self.coll

        async def go() -> None:
            flat = out.reshape(-1) if out.flags.c_contiguous else np.empty(out.size, out.dtype)
            for r, got in enumerate(await coll.allgather(arr)):
                flat[r * arr.size : (r + 1) * arr.size] = got.reshape(-1)
            _into(output, flat)

        return self._run("all_gather_into_tensor", [output], go)

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> IcnWork:  # type: ignore[override]
        t = _single(tensors, "reduce")
        arr = _array(t, "reduce's tensor")
        op = _op(opts, t.dtype)
        root = self.plan.workers[opts.rootRank]
        coll = self.coll

        async def go() -> None:
            got = await coll.reduce(arr, op, root)
            if got is not None:
                _into(t, got)

        return self._run("reduce", tensors, go)

    def reduce_scatter(  # type: ignore[override]
        self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: Any
    ) -> IcnWork:
        out = _single(outputs, "reduce_scatter")
        parts = _single(inputs, "reduce_scatter's input list")  # type: ignore[arg-type]
        if len(parts) != self.size():
            raise ValueError(
                f"backend icn: reduce_scatter needs {self.size()} input tensors, got {len(parts)}"
            )
        arrays = [_array(p, "reduce_scatter's input") for p in parts]
        op = _op(opts, out.dtype)
        rank = self.rank()
        coll = self.coll

        async def go() -> None:
            # one allreduce of every part: this rank keeps its own part of the result
            whole = np.concatenate([a.reshape(-1) for a in arrays])
            total = await coll.allreduce(whole, op, out=None if op == "mean" else whole)
            start = sum(a.size for a in arrays[:rank])
            _into(out, total[start : start + arrays[rank].size])

        return self._run("reduce_scatter", outputs, go)

    def reduce_scatter_single(
        self, output: torch.Tensor, input: torch.Tensor, opts: Any
    ) -> IcnWork:
        arr = _array(input, "reduce_scatter_tensor's input")
        n = _array(output, "reduce_scatter_tensor's output").size
        if arr.size != n * self.size():
            raise ValueError(
                f"backend icn: reduce_scatter_tensor's input has {arr.size} elements; it "
                f"needs world size x output = {n * self.size()}"
            )
        op = _op(opts, output.dtype)
        rank = self.rank()
        coll = self.coll

        async def go() -> None:
            total = await coll.allreduce(np.array(arr.reshape(-1)), op)
            _into(output, total[rank * n : (rank + 1) * n])

        return self._run("reduce_scatter_tensor", [output], go)

    # the names torch 2.13 calls (all_gather_into_tensor, reduce_scatter_tensor) and the
    # older ones C++ callers may still use.  The collectives override torch's Python-facing
    # signatures (type: ignore[override]): the group's trampoline calls this form, a list of
    # tensors and the options, as torch's own test_c10d_pypg does
    _allgather_base = all_gather_single  # type: ignore[assignment]
    _reduce_scatter_base = reduce_scatter_single  # type: ignore[assignment]

    def barrier(self, opts: Any = None) -> IcnWork:
        return self._run("barrier", [], self.coll.barrier)

    # ---- the end ---------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Leave the job together: a rank's chunks may still be pulled by the others (its
        broadcast, its part of an allgather) until every rank is done, and rank 0's forwarder
        carries them all.  Waits for the others at most the group's timeout (30 s at most), for
        ranks that died."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + min(self._timeout, 30.0)
        try:
            self._store.add(DONE_KEY, 1)
            while self._store.add(DONE_KEY, 0) < self.size() and time.monotonic() < deadline:
                time.sleep(0.01)
        except Exception as exc:  # the store is rank 0's: gone with it
            log.warning("backend icn: leaving without the others: %s", exc)
        with contextlib.suppress(Exception):
            self._loop.submit(self._close()).result(10)
        self._loop.stop()
        if self._host is not None:
            self._host.stop()

    async def _close(self) -> None:
        await self.coll.close()
        self.coll.ep.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.shutdown()
