"""Tasks on two executors: a MapReduce word count and a Monte Carlo pi.

    python examples/tasks_mapreduce.py

It starts a forwarder and two executors (``icn tasks executor``, processes of their own, one
CPU slot each, running the tasks of :mod:`apps.demos.wordcount_tasks`), then, from this
script: 16 map tasks each count the words of a chunk of text generated where it is counted,
one reduce sums their counts (passed to it as references: the counts go from executor to
executor by name, never through this script), and the answer is checked against what the text
was built to hold; then 8 tasks throw random points for pi.  It prints where the tasks ran,
and stops everything it started.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import compute.tasks as tasks
from apps.demos.wordcount_tasks import count_chunk, expected_counts, merge_counts, pi_hits

READY_WAIT = 30.0  # seconds each process gets to be ready
ICN = [sys.executable, "-c", "from apps.cli import main; main()"]


def start(argv: list[str], ready: str, log: Path) -> subprocess.Popen[bytes]:
    """Start ``icn ARGV``; return once its log shows ``ready``."""
    out = open(log, "wb")  # noqa: SIM115 (closed with the process, by the OS)
    proc = subprocess.Popen([*ICN, *argv], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + READY_WAIT
    while ready not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise SystemExit(f"icn {' '.join(argv)} did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 5 s."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="icn-tasks-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        uri = f"unix://{tmp / 'fwd.sock'}"
        procs.append(
            start(["fwd", "--unix", str(tmp / "fwd.sock")], "forwarder ready", tmp / "fwd.log")
        )
        for node in ("n1", "n2"):
            procs.append(start(
                ["tasks", "executor", "--id", node, "--module", "apps.demos.wordcount_tasks",
                 "--transport", uri],
                "tasks executor ready", tmp / f"{node}.log",
            ))  # fmt: skip
        runtime = tasks.init(uri)

        chunks, scale = 16, 5
        started = time.perf_counter()
        counts = [count_chunk.remote(1, i, scale) for i in range(chunks)]
        total = tasks.get(merge_counts.remote(*counts))
        took = time.perf_counter() - started
        assert total == expected_counts(chunks, scale), "wrong counts"
        ran_on = Counter(ref.holders[0].rsplit("/", 1)[-1] for ref in counts)
        print(
            f"word count ok: {sum(total.values()):,} words, {len(total):,} distinct, "
            f"{chunks} map tasks ({dict(ran_on)}) and 1 reduce in {took:.2f} s"
        )

        samples, parts = 200_000, 8
        hits = tasks.get([pi_hits.remote(seed, samples) for seed in range(parts)])
        pi = 4 * sum(hits) / (samples * parts)
        assert abs(pi - 3.14159) < 0.01, pi
        print(f"monte carlo pi ok: {pi:.4f} from {samples * parts:,} points in {parts} tasks")
        print(f"runtime counters: {dict(runtime.counters)}")
        tasks.shutdown()
        print("tasks ok: word count exact on 2 executors, pi within 0.01")
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
