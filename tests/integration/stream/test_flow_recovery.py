"""Operators in processes of their own on one forwarder process; the stateful window and then
the file sink are killed (SIGKILL) mid-stream and started again: each resumes from its last
checkpoint and the output has every window result exactly once."""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from apps.procs import Child, ProcessGroup, icn_argv
from compute.stream.checkpoint import Checkpoints
from compute.stream.errors import StreamError
from tests.chaos.harness import CpuLoad
from tests.integration.stream.funcs import window_means

COUNT, EPS, RATE = 9000, 1000.0, 3000.0  # 3 s of input, 9 s of event time


def graph_file(workdir: Path) -> Path:
    graph = {
        "flow": "/recover",
        "settings": {
            "checkpoint": "200ms",
            "state_dir": str(workdir / "state"),
            "lifetime": "1s",
            # push-back keeps the generator within a few batches of the slowest stage, so its
            # input cannot end before the kills however slow the machine (at 64 it ran ahead
            # to the end while a loaded machine restarted the window)
            "buffer": 16,
        },
        "operators": [
            {
                "name": "gen",
                "type": "generator",
                "count": COUNT,
                "rate": RATE,
                "batch": 50,
                "events_per_second": EPS,
                "fn": "tests.integration.stream.funcs:reading",
            },
            {
                "name": "doubled",
                "type": "map",
                "input": "gen",
                "fn": "tests.integration.stream.funcs:double",
            },
            {
                "name": "keyed",
                "type": "key_by",
                "input": "doubled",
                "field": "sensor",
                "partitions": 2,
            },
            {
                "name": "means",
                "type": "window",
                "input": "keyed",
                "tumbling": "1s",
                "aggregate": "mean",
                "field": "value",
            },
            {
                "name": "out",
                "type": "file_sink",
                "input": "means",
                "path": str(workdir / "out-{partition}.jsonl"),
            },
        ],
    }
    path = workdir / "graph.yaml"
    path.write_text(yaml.safe_dump(graph))
    return path


def wait_checkpoint(path: Path, past: int, readers_past: int = -1, timeout: float = 20) -> None:
    """Until the checkpoint at ``path`` has an entry past input ``past``, saved when every
    reader had a checkpoint past output ``readers_past``, and a restart would resume past input
    0 (an entry no reader needs to go back behind: how far apart entries are depends on how
    many batches a stage made between two checkpoints, so it is waited for, not assumed)."""
    deadline = time.monotonic() + timeout
    while True:
        ckpt = Checkpoints(path)
        with contextlib.suppress(StreamError):  # never torn (written, then renamed); still
            ckpt.load()
        durable = min((d for _, d in ckpt.readers.values()), default=past + 1)
        point = ckpt.restore_point()
        resumes = readers_past < 0 or (point is not None and point.in_pos > 0)
        if ckpt.entries and ckpt.entries[-1].in_pos > past and durable > readers_past and resumes:
            return
        assert time.monotonic() < deadline, f"{path}: no checkpoint past input {past}"
        time.sleep(0.02)  # polling the checkpoint file


def resumed_at(child: Child) -> list[int]:
    return [
        int(m) for m in re.findall(r"resumed from its checkpoint at input (\d+)", child.errors())
    ]


@pytest.mark.fault
def test_killed_operators_resume_from_checkpoints_without_loss_or_duplicates(
    workdir: Path, cpu: CpuLoad
) -> None:
    sock = workdir / "fwd.sock"
    graph = graph_file(workdir)
    state = workdir / "state" / "recover"

    def flow(group: ProcessGroup, name: str, only: str) -> Child:
        argv = icn_argv("flow", "run", str(graph), "--transport", f"unix://{sock}", "--only", only)
        return group.start(name, [*argv, "--quiet", "--timeout", "60s"])

    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)))
        fwd.wait_for("forwarder ready", stream="stderr", timeout=cpu.budget(15))
        sink = flow(group, "sink", "out")
        front = flow(group, "front", "gen,doubled,keyed")
        window = flow(group, "window", "means")

        # the window sends a batch only when windows fire (once per second of event time:
        # nothing downstream needs its watermarks), so its readers count windows, not steps
        wait_checkpoint(state / "means.0.ckpt", 20, readers_past=2, timeout=cpu.budget(20))
        wait_checkpoint(state / "means.1.ckpt", 20, readers_past=2, timeout=cpu.budget(20))
        window.proc.kill()  # SIGKILL: no chance to save anything
        window.proc.wait(10)
        window2 = flow(group, "window2", "means")
        window2.wait_for("resumed from its checkpoint", stream="stderr", timeout=cpu.budget(20))

        wait_checkpoint(state / "out.0.ckpt", 4, timeout=cpu.budget(20))
        source = Checkpoints(state / "gen.0.ckpt")
        source.load()
        # (the generator's snapshot is the records it made: batches hold rate x linger)
        assert source.entries[-1].state["source"] < COUNT, "the input ended before the kill"
        sink.proc.kill()
        sink.proc.wait(10)
        sink2 = flow(group, "sink2", "out")
        sink2.wait_for("resumed from its checkpoint", stream="stderr", timeout=cpu.budget(20))
        assert sink2.wait(cpu.budget(90)) == 0, sink2.errors()[-2000:]
        # the producers go by themselves once their readers have everything in a checkpoint
        assert window2.wait(cpu.budget(30)) == 0, window2.errors()[-2000:]
        assert front.wait(cpu.budget(30)) == 0, front.errors()[-2000:]
        assert len(resumed_at(window2)) == 2 and min(resumed_at(window2)) > 0
        assert len(resumed_at(sink2)) == 2 and max(resumed_at(sink2)) > 4
        for child in (window2, sink2):
            assert "Traceback" not in child.errors()

    got = [
        json.loads(line)["value"]
        for p in range(2)
        for line in (workdir / f"out-{p}.jsonl").read_text().splitlines()
    ]
    keys = [(w["key"], w["start"]) for w in got]
    assert len(keys) == len(set(keys)), "a window result written twice"
    assert {(w["key"], w["start"]): w["value"] for w in got} == window_means(COUNT, EPS, 1000)
