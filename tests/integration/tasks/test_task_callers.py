"""Who may run tasks: an executor started with --authorize runs the calls of the keys it lists
and refuses every other caller before fetching an argument or running anything."""

from __future__ import annotations

import subprocess

import pytest

import compute.tasks as tasks
from apps.procs import icn_argv
from compute.tasks import current
from compute.tasks.runtime import Runtime
from icn.security.keys import Identity
from tests.integration.tasks import task_funcs as f
from tests.integration.tasks.conftest import Cluster


async def test_only_the_listed_keys_may_run_tasks(cluster: Cluster) -> None:
    owner, stranger = Identity.generate(), Identity.generate()
    cluster.start_executor("n1", "--authorize", owner.fingerprint)
    intruder = await Runtime.connect(cluster.uri, identity=stranger, wait=30)
    current.runtime = intruder
    try:
        data = tasks.put(bytes(50_000))  # an argument the executor would have to fetch
        with pytest.raises(
            tasks.TaskError, match=r"task_funcs:length: .*is not authorized to call it"
        ):
            await f.length.remote(data)
        with pytest.raises(tasks.TaskError, match=r"task_funcs:Tally: .*is not authorized"):
            tally = f.Tally.remote(1)
            await tally.add.remote(1)
        status = await intruder.client.call("/cfn/node/n1/status")  # (counters: anyone)
        assert status["counters"].get("tasks_run", 0) == 0
        assert status["counters"].get("args_fetched", 0) == 0  # refused before any work
        assert status["actors"] == {}
    finally:
        current.runtime = None
        await intruder.close()
    own = await Runtime.connect(cluster.uri, identity=owner, wait=30)
    current.runtime = own
    try:
        assert await f.add.remote(2, 3) == 5
    finally:
        current.runtime = None
        await own.close()


def test_a_bad_authorize_value_is_refused_with_the_fix(cluster: Cluster) -> None:
    proc = subprocess.run(
        [*icn_argv("tasks", "executor", "--id", "n1", "--module", "json", "--authorize", "xyz",
                   "--transport", cluster.uri)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --authorize: authorized key 'xyz': write the key's SHA-256 fingerprint in hex "
        "(at least 16 digits; `icn key show` prints it)"
    ]
