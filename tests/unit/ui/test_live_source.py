"""The live page's source: a node's panel asks its forwarder at most once a second however many
pages ask, gives up after its timeout, and workloads' files are read as they grow (a line
half written is left for the next frame)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from apps.scenario.runner import RunState
from apps.scenario.schema import Scenario
from apps.scenario.ui import server
from apps.scenario.ui.server import LiveSource

T0 = 1000.0


def runner(tmp_path: Path) -> Any:
    sc = Scenario.model_validate(
        {
            "name": "ls",
            "duration": 5,
            "nodes": {"a": {}, "b": {}},
            "links": [{"between": ["a", "b"]}],
            "workloads": [{"name": "w", "node": "a", "entry": "m:f"}],
        }
    )
    return SimpleNamespace(
        sc=sc,
        state=RunState(t0=T0),
        results_path=lambda name: tmp_path / f"{name}.jsonl",
        fabric=SimpleNamespace(endpoints={"a": object()}),
        now=lambda: 2.5,
    )


async def test_a_node_is_asked_once_a_second_whatever_the_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    async def status(_ep: object, which: str) -> Any:
        asked.append(which)
        await asyncio.sleep(0.01)
        return {"n_in_interests": 7, "nfd_version": "x"} if which == "status/general" else []

    from icn.dataplane import mgmt_client

    monkeypatch.setattr(mgmt_client, "status", status)
    source = LiveSource(runner(tmp_path))
    answers = await asyncio.gather(*(source.node("a") for _ in range(5)))
    assert asked == ["status/general", "faces/list", "fib/list"]
    assert all(a["counters"] == {"n_in_interests": 7} for a in answers)
    monkeypatch.setattr(server, "NODE_CACHE", 0.0)
    await source.node("a")
    assert len(asked) == 6
    assert "not running" in (await source.node("b"))["error"]


async def test_a_silent_node_is_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def status(_ep: object, _which: str) -> Any:
        await asyncio.sleep(30)

    from icn.dataplane import mgmt_client

    monkeypatch.setattr(mgmt_client, "status", status)
    monkeypatch.setattr(server, "NODE_TIMEOUT", 0.05)
    answer = await asyncio.wait_for(LiveSource(runner(tmp_path)).node("a"), 2)
    assert "no answer from its forwarder" in answer["error"]


def test_workload_lines_are_read_as_they_are_completed(tmp_path: Path) -> None:
    r = runner(tmp_path)
    source = LiveSource(r)
    assert source.latest() is None  # no sample yet
    r.state.samples.append({"t": 2.0, "nodes": {"a": {}, "b": None}, "links": {}})
    line = json.dumps({"t": T0 + 0.5, "ok": True, "latency": 0.004})
    path = tmp_path / "w.jsonl"
    path.write_text(line + "\n" + line[:10])  # the second line still being written
    first = source.latest()
    assert first is not None and first["workloads"]["w"][0]["ok"] == 1
    with path.open("a") as f:
        f.write(line[10:] + "\n")
    later = source.latest()
    assert later is not None and later["workloads"]["w"][0]["ok"] == 2
    assert later["now"] == 2.5 and later["ended"] is False and later["nodes"]["b"] is None
