"""The torch.distributed backend ``icn`` against gloo, with real rank processes.

Each rank is a process (``torch_rank.py``) that calls ``init_process_group`` with a file store
in this test's directory; with no plan configured, rank 0 starts a forwarder and aggregator
(``apps.collective_host``) that the ranks share over a Unix socket.  Every process is stopped by
PID.  The ranks write numpy arrays and JSON, so this process does not import torch (over a
second of CPU in every test worker that collects this file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tests.chaos.harness import CpuLoad
from tests.needs import has_module, needs

pytestmark = needs(has_module("torch"), "the torch extra: pip install -e .[torch]")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def run_ranks(
    tmp: Path, mode: str, backend: str, world: int, timeout: float = 90, rank_timeout: float = 60
) -> list[subprocess.Popen[str]]:
    out = tmp / f"{mode}-{backend}"
    out.mkdir()
    # the ranks' temporary files under this test's directory, where the tests look for leftovers
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RANK_TIMEOUT": str(rank_timeout)}
    env["TMPDIR"] = str(tmp)
    env.pop("ICN_TORCH_PLAN", None)
    store = tmp / f"store-{mode}-{backend}"
    procs = []
    for rank in range(world):
        argv = [sys.executable, "-W", "ignore", str(HERE / "torch_rank.py"), mode, backend]
        argv += [str(rank), str(world), str(store), str(out)]
        procs.append(
            subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    try:
        for p in procs:
            p.wait(timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    return procs


def outputs(procs: list[subprocess.Popen[str]]) -> str:
    return "\n".join(
        f"--- rank {i}:\n{p.stdout.read() if p.stdout else ''}" for i, p in enumerate(procs)
    )


def half(saved: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The results saved under ``prefix``, by operation name."""
    return {k.removeprefix(prefix): v for k, v in saved.items() if k.startswith(prefix)}


def test_every_operation_gives_gloos_tensors_at_every_rank(tmp_path: Path) -> None:
    world = 3
    # each rank runs every operation over icn (its default group) and over a gloo group
    procs = run_ranks(tmp_path, "ops", "icn", world)
    assert all(p.returncode == 0 for p in procs), outputs(procs)
    results = []
    for r in range(world):
        with np.load(tmp_path / "ops-icn" / f"{r}.npz") as saved:
            results.append({name: saved[name] for name in saved.files})
    ours: list[dict[str, np.ndarray]] = []
    theirs: list[dict[str, np.ndarray]] = []
    for saved in results:
        assert saved.pop("backends").tolist() == ["icn", "gloo"]
        ours.append(half(saved, "icn/"))
        theirs.append(half(saved, "gloo/"))
    assert len(ours[0]) > 50  # every operation over every dtype
    for rank in range(world):
        assert ours[rank].keys() == theirs[rank].keys()
        for name, want in theirs[rank].items():
            got = ours[rank][name]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            if np.issubdtype(want.dtype, np.floating):
                # float sums may be folded in another order than gloo's ring
                atol = 1e-2 if want.dtype == np.float16 else 1e-5
                assert np.allclose(got, want, rtol=1e-4, atol=atol), (name, got, want)
            else:
                assert np.array_equal(got, want), (name, got, want)
    # the same bits at every rank, for what every rank receives
    for name, first in ours[0].items():
        if name.startswith(("allreduce", "broadcast", "allgather", "all_gather")):
            for rank in range(1, world):
                assert np.array_equal(ours[rank][name], first), (name, rank)


def test_a_killed_rank_makes_the_others_fail_naming_it(tmp_path: Path, cpu: CpuLoad) -> None:
    world = 3
    # the group's timeout: 6 s on a quiet machine (the first allreduce, with rank 0 starting
    # its forwarder, must fit in it too), as much more as the CPU is slower
    group_timeout = cpu.budget(6)
    procs = run_ranks(
        tmp_path, "kill", "icn", world, timeout=cpu.budget(60), rank_timeout=group_timeout
    )
    assert procs[-1].returncode == -9
    for rank in range(world - 1):
        path = tmp_path / "kill-icn" / f"{rank}.json"
        assert path.exists(), outputs(procs)
        seen = json.loads(path.read_text())
        assert seen["raised"] == "IcnBackendError", seen
        assert "allreduce failed" in seen["message"], seen
        assert str(world - 1) in seen["message"], seen  # the dead rank's worker is named
        # within the group's timeout, not a hang (5 s more on a quiet machine)
        assert seen["seconds"] < group_timeout + cpu.budget(5), seen
    # rank 0 left without shutting down (as when a launcher kills it): its forwarder saw its
    # stdin close, stopped, and removed rank 0's files
    deadline = time.monotonic() + cpu.budget(10)
    while list(tmp_path.glob("icn-torch-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(tmp_path.glob("icn-torch-*"))


def test_what_it_does_not_support_is_refused_naming_the_alternative(tmp_path: Path) -> None:
    procs = run_ranks(tmp_path, "errors", "icn", 1)
    assert procs[0].returncode == 0, outputs(procs)
    said = json.loads((tmp_path / "errors-icn" / "0.json").read_text())
    assert "meta" in said["meta"] and "tensor.cpu()" in said["meta"], said
    assert "bfloat16" in said["bfloat16"] and "gloo" in said["bfloat16"], said
    assert "BAND" in said["band"] or "bitwise" in said["band"], said
    assert "AVG" in said["avg int"] and "SUM" in said["avg int"], said
    assert "sub-groups" in said["new_group"] and "gloo" in said["new_group"], said
    assert said["after"] == "[0.0, 1.0, 2.0, 3.0]"
