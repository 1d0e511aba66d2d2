"""A forwarder and executors as real processes, for the task platform's tests."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import compute.tasks as tasks
from apps.procs import Child, ProcessGroup, icn_argv
from compute.tasks import current
from compute.tasks.runtime import Runtime
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]
MODULE = "tests.integration.tasks.task_funcs"


@dataclass
class Cluster:
    group: ProcessGroup
    sock: Path
    runs: Path
    executors: dict[str, Child] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return f"unix://{self.sock}"

    def env(self) -> dict[str, str]:
        return {
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "ICN_TEST_RUNS": str(self.runs),
        }

    def start_executor(self, node: str, *extra: str) -> Child:
        child = self.group.start(
            node,
            icn_argv(
                "tasks",
                "executor",
                "--id",
                node,
                "--module",
                MODULE,
                "--transport",
                self.uri,
                *extra,
            ),
            env=self.env(),
        )
        child.wait_for("tasks executor ready", stream="stdout", timeout=30)
        self.executors[node] = child
        return child

    def kill(self, node: str) -> None:
        """SIGKILL the executor ``node`` by its PID and reap it (no goodbye to anyone)."""
        child = self.executors.pop(node)
        child.proc.kill()
        child.proc.wait(10)

    def runs_of(self, what: str) -> list[int]:
        """PIDs of the processes that ran ``what`` (one per run)."""
        return [int(p.read_text()) for p in self.runs.glob(f"{what}-*")]


@pytest.fixture
def cluster(workdir: Path) -> Iterator[Cluster]:
    """A forwarder (no executors yet: each test starts what it needs)."""
    runs = workdir / "runs"
    runs.mkdir()
    os.environ["ICN_TEST_RUNS"] = str(runs)  # for the tasks this process runs itself
    sock = workdir / "fwd.sock"
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)))
        fwd.wait_for("forwarder ready", stream="stderr")
        yield Cluster(group, sock, runs)
        for child in group.children:
            assert "Traceback" not in child.errors(), child.errors()
    os.environ.pop("ICN_TEST_RUNS", None)


@contextlib.asynccontextmanager
async def driving(cluster: Cluster) -> AsyncIterator[Runtime]:
    """A runtime in the test's loop on the cluster, current for ``.remote(...)`` (start the
    executors it needs first)."""
    runtime = await tasks.connect(cluster.uri, wait=30)
    try:
        yield runtime
    finally:
        current.runtime = None
        await runtime.close()


@pytest.fixture
async def two(cluster: Cluster) -> AsyncIterator[Runtime]:
    """Executors n1 and n2 (1 CPU each) and a runtime on them."""
    cluster.start_executor("n1")
    cluster.start_executor("n2")
    async with driving(cluster) as runtime:
        await wait_until(lambda: len(runtime.placement.executors) == 2, timeout=10)
        yield runtime
