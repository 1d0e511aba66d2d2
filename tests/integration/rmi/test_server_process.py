"""`icn serve` as a real process and `icn call` against it (its first call a process too, the
others in this one: tests/integration/icn_runs.py): a server killed mid-call, and the CLI's
output and exit codes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.procs import Child, ProcessGroup, icn_argv
from compute.rmi import Client, ServerUnavailable
from tests.chaos.harness import CpuLoad
from tests.integration.icn_runs import run_icn
from tests.waiting import wait_until


@pytest.fixture
def served(workdir: Path, cpu: CpuLoad) -> Iterator[tuple[str, Child]]:
    sock = workdir / "fwd.sock"
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)))
        fwd.wait_for("forwarder ready", stream="stderr", timeout=cpu.budget(15))
        uri = f"unix://{sock}"
        # calls answered in their first Data, as on a quiet machine, whatever the load (a call
        # past the budget is answered by thunk and poll, its result then in the packets)
        budget = f"{cpu.budget(1.0):.3f}s"
        argv = icn_argv(
            "serve", "tests.integration.rmi.funcs", "--prefix", "/svc", "--inline-budget", budget
        )
        server = group.start("server", [*argv, "--transport", uri])
        server.wait_for("rmi server ready", stream="stdout", timeout=cpu.budget(15))
        yield uri, server


@pytest.mark.fault
async def test_server_killed_mid_call_gives_a_clear_error_in_time(
    served: tuple[str, Child], cpu: CpuLoad
) -> None:
    uri, server = served
    client = await Client.connect(uri, lifetime_ms=1000, timeout=30.0)
    try:
        states: list[str] = []
        call = asyncio.ensure_future(
            client.invoke("/svc/slow", (5.0,), progress=lambda state, *_: states.append(state))
        )
        # the client has the thunk: the call is running on the server
        await wait_until(lambda: "running" in states or call.done(), cpu.budget(10))
        assert not call.done()
        server.proc.kill()
        server.proc.wait(5)
        loop = asyncio.get_running_loop()
        killed_at = loop.time()
        with pytest.raises(ServerUnavailable) as info:
            await asyncio.wait_for(call, cpu.budget(15))
        # well within the call's 30 s deadline: at the next poll (2 s apart at most), plus its
        # retries (three 1 s Interest lifetimes)
        assert loop.time() - killed_at < cpu.budget(10)
        assert "/svc/slow" in str(info.value) and "/svc/_thunk/" in str(info.value)
    finally:
        client.close()


def icn(uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``icn ARGS --transport URI``: the first call of a command in a test as a process, the
    later ones in this process (tests/integration/icn_runs.py)."""
    argv = [*args, "--transport", uri]
    ran = run_icn(argv, {})
    return subprocess.CompletedProcess(
        argv, ran.returncode, ran.stdout.decode(), ran.stderr.decode()
    )


async def test_large_calls_in_a_session_go_through_the_callers_memory_file(
    served: tuple[str, Child], cpu: CpuLoad
) -> None:
    # two processes of one host: the server maps the caller's file (compute/rmi/local.py)
    uri, _ = served
    client = await Client.connect(uri, timeout=cpu.budget(30))
    try:
        blob = os.urandom(256 * 1024)
        for _ in range(3):
            assert await client.call("/svc/echo", blob) == blob
        assert client.counters["session_calls"] == 2
        assert client.counters["local_answers"] == 2 and client.counters["not_local"] == 0
    finally:
        client.close()


def test_cli_call_results_errors_and_exit_codes(served: tuple[str, Child]) -> None:
    uri, _ = served
    ok = icn(uri, "call", "/svc/add", "2", "--kw", "b=40")
    assert ok.returncode == 0 and ok.stdout.strip() == "42", ok.stderr
    as_json = icn(uri, "call", "/svc/echo", '{"a": [1, "x"]}', "--json")
    assert json.loads(as_json.stdout) == {"a": [1, "x"]}
    remote = icn(uri, "call", "/svc/boom", "7")
    assert remote.returncode == 1
    assert "RemoteError" in remote.stderr and "ValueError: bad input 7" in remote.stderr
    missing = icn(uri, "call", "/svc/nope")
    assert missing.returncode == 1 and "NoSuchFunction" in missing.stderr
    no_server = icn(uri, "call", "/elsewhere/fn")
    assert no_server.returncode == 3 and "no route" in no_server.stderr
    late = icn(uri, "call", "/svc/slow", "3", "--timeout", "1s")
    assert late.returncode == 4 and "timed out" in late.stderr
    bad = icn(uri, "call", "svc")
    assert bad.returncode == 2
