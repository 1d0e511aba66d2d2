"""Cancelling a call: the caller's task cancelled stops the job on the server (a coroutine is
cancelled where it awaits; work in a thread is abandoned and counted), and the caller sees
CancelledError."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from compute.rmi.jobs import Job
from tests.chaos.harness import CpuLoad
from tests.integration.rmi import funcs
from tests.integration.rmi.conftest import PREFIX, Line
from tests.waiting import wait_until


async def cancel_once_thunked(line: Line, call: str, *args: object) -> None:
    server = line.server
    assert server is not None
    client = line.client()
    states: list[str] = []
    task = asyncio.create_task(
        client.invoke(call, args, progress=lambda state, *_: states.append(state))
    )
    # the server runs it and the caller has its thunk (answered after the inline budget): the
    # caller says "running" once it has the thunk and polls it
    await wait_until(lambda: server.counters["thunked"] == 1 and states == ["running"])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.counters["cancelled"] == 1


async def test_a_cancelled_30_s_job_stops_within_one_second_on_the_server(
    line: Line, cpu: CpuLoad
) -> None:
    server = await line.start_server()
    cpu.budget(1.0)  # the load before the timed part counts too (the larger is kept)
    await cancel_once_thunked(line, f"{PREFIX}/slow", 30.0)
    loop = asyncio.get_running_loop()
    cancelled_at = loop.time()
    await wait_until(lambda: not server.jobs.running, timeout=20.0)  # (not its 30 s)
    # one second on a quiet machine, as much more as the CPU was slower
    assert loop.time() - cancelled_at < cpu.budget(1.0)
    assert server.counters["cancelled"] == 1 and server.counters["abandoned"] == 0
    assert funcs.RAN["slow"] == 1 and server.counters["completed"] == 0


async def test_a_cancelled_call_in_a_thread_is_abandoned_and_counted(line: Line) -> None:
    server = await line.start_server()
    await cancel_once_thunked(line, f"{PREFIX}/held_in_thread")
    # the cancel reaches the server while the thread still blocks: abandoned, not finished
    await wait_until(lambda: server.counters["cancelled"] == 1)
    assert server.counters["abandoned"] == 1 and not server.jobs.running
    assert server.counters["completed"] == 0


@pytest.mark.parametrize("in_session", [True, False])
async def test_a_call_cancelled_before_its_thunk_arrives_still_stops_on_the_server(
    line: Line, in_session: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cancelled within the server's inline budget: the caller has no thunk to cancel yet, so
    # it asks for the call's answer again (never run twice) and cancels the thunk it gets
    server = await line.start_server()
    client = line.client()
    if in_session:
        assert await client.call(f"{PREFIX}/echo", 1) == 1  # agrees the session
    task = asyncio.create_task(client.call(f"{PREFIX}/slow", 30.0))
    # the caller is cancelled as the job starts, in the same step: before the inline budget
    # (50 ms) can end and answer it with a thunk, however slowly a loaded machine runs the
    # loop (a test that looked every 5 ms could see the job only after the thunk had gone)
    thunked_at_cancel: list[int] = []
    run = server.jobs.run

    def run_then_cancel(job: Job, args: list[Any], kwargs: dict[str, Any]) -> None:
        run(job, args, kwargs)
        if job.spec.name == "slow":
            thunked_at_cancel.append(server.counters["thunked"])
            task.cancel()

    monkeypatch.setattr(server.jobs, "run", run_then_cancel)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert thunked_at_cancel == [0]  # still within the inline budget
    await wait_until(lambda: not server.jobs.running)  # (its 30 s are not waited for)
    assert server.counters["cancelled"] == 1
    assert server.counters["completed"] == (1 if in_session else 0)  # (the echo)
    assert funcs.RAN["slow"] == 1 and client.counters["cancelled"] == 1
    # in a session the call was asked again under its sequence number: answered, not rerun
    assert server.counters["session_calls"] == (1 if in_session else 0)
    assert server.counters["session_replay"] == (1 if in_session else 0)
