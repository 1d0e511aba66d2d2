"""The executor scenario entry refuses a bad ``args.modules`` at start, naming the field and
the fix, rather than failing every task later."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.scenario.entry import ServiceContext
from apps.tasks_entries import executor


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        (
            "no_such_module_xyz",
            r"args.modules: cannot import 'no_such_module_xyz'.*e.g. apps.demos",
        ),
        ([], r"args.modules: expected a module name or a list"),
        ({"a": 1}, r"args.modules: expected a module name or a list"),
    ],
)
async def test_a_bad_modules_field_stops_the_executor_at_start(
    modules: object, message: str, tmp_path: Path
) -> None:
    ctx = ServiceContext("exec1", "w1", {"modules": modules}, "unix:///nowhere", tmp_path)
    with pytest.raises(SystemExit, match=message):
        await executor(ctx)
