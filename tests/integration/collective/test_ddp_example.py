"""apps/demos/ddp_example.py, an unmodified DistributedDataParallel script, trains the same over
torch.distributed's backend icn as over gloo; bench/ddp.py runs and ends with its ratio line.

Each run starts its ranks with the example's launcher (``--nproc``), on loopback: icn with the
forwarder and aggregator its rank 0 starts (no plan in the environment).  One run of the bench
serves two tests: it runs the example for 3 epochs over each backend, and keeps every rank's
summary and the example's output for the accuracy test (two runs of 2 ranks instead of four).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.needs import has_module, needs

pytestmark = needs(has_module("torch"), "the DDP example needs torch: pip install -e .[torch]")

ROOT = Path(__file__).resolve().parents[3]
RANKS = 2
STEPS = 63  # 3 epochs of 21 global batches of 64 digits (checked below: 3 epoch losses)


def _env() -> dict[str, str]:
    # no plan and no forwarder named: rank 0 of the icn runs starts its own
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICN_TORCH_")}
    env.pop("NDN_CLIENT_TRANSPORT", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return env


@dataclass
class Bench:
    """The bench's run: its output, and the directory of what it kept of the example's runs."""

    proc: subprocess.CompletedProcess[str]
    kept: Path

    def summaries(self, backend: str) -> list[dict[str, Any]]:
        """Every rank's summary of the run over ``backend``."""
        return [
            json.loads((self.kept / f"{backend}-n{RANKS}-{r}.json").read_text())
            for r in range(RANKS)
        ]

    def output(self, backend: str) -> str:
        """What the example printed in the run over ``backend``."""
        return (self.kept / f"{backend}-n{RANKS}.log").read_text()


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    """bench/ddp.py at RANKS ranks, one round of STEPS steps per backend, its runs kept."""
    kept = tmp_path_factory.mktemp("bench-ddp")
    argv = [sys.executable, str(ROOT / "bench" / "ddp.py"), "--ranks", str(RANKS)]
    argv += ["--steps", str(STEPS), "--warmup", "2", "--repeat", "1", "--timeout", "90"]
    argv += ["--keep", str(kept)]
    proc = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=240)
    return Bench(proc, kept)


# the two tests of the bench's run: one worker runs them, and the bench once
@pytest.mark.xdist_group("ddp-bench")
def test_three_epochs_over_icn_reach_gloos_accuracy_with_identical_ranks(bench: Bench) -> None:
    assert bench.proc.returncode == 0, bench.proc.stdout + bench.proc.stderr[-3000:]
    # every run as it came, none made again after a failure (the bench would retry one)
    assert "made again" not in bench.proc.stdout + bench.proc.stderr, bench.proc.stderr[-3000:]
    runs = {backend: bench.summaries(backend) for backend in ("gloo", "icn")}
    for backend, ranks in runs.items():
        said = bench.output(backend)
        assert "test accuracy" in said and "epoch 3: loss" in said, said
        # every rank holds the same model: each rank's own hash, and the gathered ones
        own = {s["param_hash"] for s in ranks}
        assert len(own) == 1, f"{backend}: the ranks' parameters differ"
        assert all(set(s["param_hashes"]) == own for s in ranks), backend
        assert [s["rank"] for s in ranks] == list(range(RANKS))
        assert all(s["world_size"] == RANKS and s["steps"] == STEPS for s in ranks)
        losses = ranks[0]["losses"]
        assert len(losses) == 3 and losses[0] > losses[1] > losses[2], losses  # it learns
    icn, gloo = runs["icn"][0], runs["gloo"][0]
    assert icn["backend"] == "icn" and gloo["backend"] == "gloo"
    assert gloo["accuracy"] > 0.85  # not a model that learnt nothing, equalled
    assert abs(icn["accuracy"] - gloo["accuracy"]) <= 0.01
    # the same updates up to the order of float32 sums
    assert icn["losses"] == pytest.approx(gloo["losses"], rel=1e-4)


def _children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid``, lowest first."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def _rank_of(pid: int) -> int:
    for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        if item.startswith(b"RANK="):
            return int(item[5:])
    raise AssertionError(f"process {pid} has no RANK in its environment")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_rank_killed_mid_run_makes_the_launcher_stop_the_others(tmp_path: Path) -> None:
    argv = [sys.executable, str(ROOT / "apps" / "demos" / "ddp_example.py"), "--nproc", str(RANKS)]
    argv += ["--backend", "icn", "--epochs", "1000", "--timeout", "90"]
    proc = subprocess.Popen(argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        # "epoch 1: ..." once training runs; bounded by the launcher's --timeout, which
        # closes the pipe when it stops the ranks
        first = proc.stdout.readline()
        assert first.startswith(b"epoch 1: loss"), first
        ranks = {_rank_of(c): c for c in _children(proc.pid)}
        assert sorted(ranks) == list(range(RANKS))
        os.kill(ranks[1], signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 128 + signal.SIGKILL, err[-3000:]
    assert b"rank 1 exited with code -9: stopping the others" in err
    assert _gone(ranks[0])  # stopped by the launcher, not left training alone


@pytest.mark.slow
@pytest.mark.xdist_group("ddp-bench")
def test_the_bench_runs_and_ends_with_its_ratio(bench: Bench) -> None:
    proc = bench.proc
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert re.fullmatch(r"ddp icn/gloo step time: \d+\.\d\d", lines[-1]), proc.stdout
    # the table's row for 2 ranks: compute, gloo's and icn's times and CPU, their ratio
    row = r"^\s+2 \| +[\d.]+ \| +[\d.]+ +[\d.]+ \| +[\d.]+ +[\d.]+ \| +([\d.]+) \|"
    found = re.search(row, proc.stdout, re.M)
    assert found is not None, proc.stdout
    assert found.group(1) == lines[-1].rsplit(" ", 1)[1]  # one rank count: its ratio is the mean
