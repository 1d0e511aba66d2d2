"""compute.rmi.serve and call_sync from plain scripts (issue 37): a forwarder on a Unix socket
runs on a thread of its own, as ``icn fwd`` would in another process; the server runs with
``serve_in_background`` and the calls are ``call_sync``'s.  What the forwarder counted (faces
made) and what the server counted (sessions agreed, calls in them) show that a loop of calls
uses one connection and one session."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps.inproc import attach_endpoint
from compute.rmi import (
    Client,
    Serving,
    Unauthorized,
    call,
    call_sync,
    close_sync_client,
    default_client,
    function,
    serve,
    serve_in_background,
    set_identity,
)
from compute.rmi.identity import IDENTITY_ENV
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.client_conf import ENV_VAR
from icn.errors import ConfigError, ForwarderUnreachable
from tests.integration.rmi import funcs

WAIT = 10.0  # seconds any start or stop below may take


@dataclass
class ThreadedForwarder:
    daemon: ForwarderDaemon
    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event
    uri: str

    def faces_made(self) -> int:
        return int(self.daemon.counters.get("face.created", 0))


@contextmanager
def forwarder_thread(workdir: Path) -> Iterator[ThreadedForwarder]:
    """A forwarder on ``workdir/fwd.sock`` with its own loop in a thread, stopped at the end."""
    started = threading.Event()
    box: list[ThreadedForwarder] = []

    async def main() -> None:
        daemon = ForwarderDaemon(config_from_dict({"listen": {"unix": str(workdir / "fwd.sock")}}))
        await daemon.start(signals=False)  # (signal handlers are the main thread's)
        stop = asyncio.Event()
        box.append(
            ThreadedForwarder(daemon, asyncio.get_running_loop(), stop, daemon.listen_uris[0])
        )
        started.set()
        try:
            await stop.wait()
        finally:
            await daemon.stop()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(WAIT), "the forwarder did not start"
    fwd = box[0]
    try:
        yield fwd
    finally:
        fwd.loop.call_soon_threadsafe(fwd.stop.set)
        thread.join(WAIT)
        assert not thread.is_alive(), "the forwarder's thread did not end"


@pytest.fixture
def fwd(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadedForwarder]:
    """The forwarder, named by NDN_CLIENT_TRANSPORT; call_sync's client closed before and
    after, so each test counts its own connections."""
    close_sync_client()
    with forwarder_thread(workdir) as running:
        monkeypatch.setenv(ENV_VAR, running.uri)
        funcs.RAN.clear()
        try:
            yield running
        finally:
            close_sync_client()


def test_call_sync_uses_one_connection_and_one_session(fwd: ThreadedForwarder) -> None:
    with serve_in_background(funcs, prefix="/svc", transport=fwd.uri) as bg:
        assert bg.serving is not None
        server = bg.serving.server
        before = fwd.faces_made()
        for i in range(40):
            assert call_sync("/svc/echo", i) == i
        assert fwd.faces_made() - before == 1  # one connection for the forty calls
        assert server.counters["sessions"] == 1  # agreed by the first call...
        assert server.counters["session_calls"] == 39  # ...which all the others used
        assert server.counters["calls"] == 1
    assert funcs.RAN["echo"] == 40


def test_threads_share_call_syncs_client(fwd: ThreadedForwarder) -> None:
    with serve_in_background(funcs, prefix="/svc", transport=fwd.uri) as bg:
        assert bg.serving is not None
        before = fwd.faces_made()
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda i: call_sync("/svc/echo", i), range(60)))
        assert results == list(range(60))
        assert fwd.faces_made() - before == 1
        assert bg.serving.server.counters["sessions"] == 1
    # closed: the next call connects again (and a forwarder restart is survived the same way)
    close_sync_client()
    with serve_in_background(funcs, prefix="/svc", transport=fwd.uri):
        before = fwd.faces_made()
        assert call_sync("/svc/echo", "again") == "again"
        assert fwd.faces_made() - before == 1


async def test_call_sync_refuses_to_block_an_event_loop() -> None:
    with pytest.raises(
        RuntimeError, match=r"inside a running event loop.*await compute\.rmi\.call"
    ):
        call_sync("/svc/echo", 1)


@function
def greet(name: str) -> str:
    return f"hello, {name}"


def plain(name: str) -> str:
    return name


def test_serve_in_background_takes_functions_and_stops_with_counters(
    fwd: ThreadedForwarder,
) -> None:
    bg = serve_in_background([greet], prefix="/hello", transport=fwd.uri)
    try:
        assert bg.serving is not None
        assert bg.serving.describe().startswith("serving /hello/{greet} as key ")
        assert call_sync("/hello/greet", "world") == "hello, world"
    finally:
        counters = bg.stop()
    assert counters["calls"] == 1
    assert bg.stop() == counters  # idempotent
    with pytest.raises(ConfigError, match=r"'plain' is not a named function.*@compute\.rmi"):
        serve_in_background([plain], transport=fwd.uri)
    with pytest.raises(ForwarderUnreachable, match="no forwarder at unix://"):
        serve_in_background([greet], transport=fwd.uri + ".missing")


def test_losing_the_forwarder_ends_serving_with_its_error(workdir: Path) -> None:
    with forwarder_thread(workdir) as running:
        bg = serve_in_background([greet], prefix="/hello", transport=running.uri)
    # the forwarder stopped under the server, which ends by itself and says so
    assert bg.wait(WAIT)
    with pytest.raises(ForwarderUnreachable, match="lost the forwarder at unix://"):
        bg.stop()


async def test_serve_runs_until_cancelled_and_leaves_the_callers_endpoint_open() -> None:
    daemon = ForwarderDaemon(config_from_dict({"listen": {}}))
    await daemon.start()
    ep = attach_endpoint(daemon)
    ready: asyncio.Queue[Serving] = asyncio.Queue()
    task = asyncio.ensure_future(serve([greet], "/hello", endpoint=ep, ready=ready.put_nowait))
    try:
        serving = await asyncio.wait_for(ready.get(), WAIT)
        assert serving.uri == "memory://"
        async with Client(attach_endpoint(daemon)) as client:
            assert await client.call("/hello/greet", "loop") == "hello, loop"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)
        assert not ep.closed  # the caller's, to close
        assert serving.server.counters["calls"] == 1
    finally:
        task.cancel()
        ep.close()
        await daemon.stop()


async def test_set_identity_ends_the_sessions_of_the_old_key(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session is the key that agreed it: after set_identity, ``call`` must not go on
    calling as the old key through it (it did: the server let an unlisted key's calls run)."""
    daemon = ForwarderDaemon(config_from_dict({"listen": {"unix": str(workdir / "fwd.sock")}}))
    await daemon.start(signals=False)
    monkeypatch.setenv(ENV_VAR, daemon.listen_uris[0])
    monkeypatch.delenv(IDENTITY_ENV, raising=False)
    task = asyncio.ensure_future(serve(funcs, "/svc", endpoint=attach_endpoint(daemon)))
    try:
        allowed = set_identity(workdir / "allowed.key")
        funcs.ALLOWED.add(allowed.fingerprint)
        assert await call("/svc/guarded", 1) == 2
        assert await call("/svc/guarded", 2) == 4  # in the session agreed as the allowed key
        assert (await default_client()).counters["sessions"] == 1
        set_identity(workdir / "other.key")  # a key nobody listed
        with pytest.raises(Unauthorized):
            await call("/svc/guarded", 3)
        assert funcs.RAN["guarded"] == 2
    finally:
        funcs.ALLOWED.clear()
        set_identity(None)
        (await default_client()).close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await daemon.stop()
