"""The collective scenario entries refuse bad arguments with a message naming the field, before
they touch the network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apps import collective_entries
from apps.scenario.entry import WorkloadContext

JOB = {"job": "/ar", "workers": {"w0": "a", "w1": "b"}, "aggregators": ["r"], "worker": "w0"}


def context(tmp_path: Path, **args: Any) -> WorkloadContext:
    return WorkloadContext(
        name="w0",
        node="a",
        args={**JOB, **args},
        transport="unix:///nonexistent.sock",  # never reached: the arguments fail first
        run_dir=tmp_path,
        links=[("a", "r"), ("b", "r")],
        duration=1.0,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"dtype": "nonsense"}, "args.dtype"),
        ({"dtype": "object"}, "args.dtype"),
        ({"op": "median"}, "args.op"),
        ({"rounds": "many"}, "args.rounds"),
        ({"size": "lots"}, "args.size"),
        ({"workers": "w0"}, "args.workers"),
        ({"aggregators": ["zz"]}, "args:"),
    ],
)
async def test_bad_worker_arguments_name_the_field(
    tmp_path: Path, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(SystemExit, match=message):
        await collective_entries.worker(context(tmp_path, **args))
