"""Tasks and actors against Ray and Dask, in the same run, on the same cores.

Ours: one ``icn fwd`` and two executors (``icn tasks executor --num-cpus 1``), the driver in
this process (compute.tasks).  Ray: ``ray.init(num_cpus=2)`` (its defaults otherwise).  Dask:
``LocalCluster(n_workers=2, threads_per_worker=1)`` (processes, its defaults otherwise).  Each
framework runs alone, after the one before has stopped (Dask, ours, then Ray).

Patterns (Ray's own microbenchmark, python/ray/_private/ray_perf.py): one empty task at a time
(submit, get); 1,000 empty tasks at once; an actor's empty method one call at a time and 1,000
at once; put and get of a 1 MiB object.  Rates are the best of ``--repeat`` timed rounds of
``--seconds`` each.  Then a word count over ``--mb`` MB of generated text in 64 chunks (each
chunk generated where it is counted, a map task per chunk and one reduce over the 64 counts),
ours against Dask's, each checked against the expected number of words.

Dask runs the word count twice: with dict results (its default form, which its protocol moves
between processes item by item) and with each chunk's counts pickled into bytes (its best: one
piece); the headline takes its best.

Last line: ``tasks ours/ray: X, wordcount ours/dask time: Y`` (X the geometric mean of our
rates over Ray's, Y our job's time over Dask's best).

Run: .venv/bin/python bench/tasks.py [--quick] [--seconds S] [--mb MB]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from apps.procs import ProcessGroup, icn_argv  # noqa: E402
from bench import tasks_funcs as funcs  # noqa: E402

PATTERNS = (
    "sync empty task",
    "1,000 empty tasks",
    "actor call sync",
    "1,000 actor calls",
    "put/get 1 MiB",
)
CHUNKS = 64
SEED = 7


def rate(body: Callable[[], int], seconds: float, repeat: int) -> float:
    """The best of ``repeat`` rounds: operations per second of ``body`` (which returns how many
    it did) run again and again for ``seconds``."""
    body()  # warm-up
    best = 0.0
    for _ in range(repeat):
        done = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            done += body()
        best = max(best, done / (time.perf_counter() - start))
    return best


def patterns(
    submit: Callable[[], Any],
    get: Callable[[Any], Any],
    actor_call: Callable[[], Any],
    put: Callable[[bytes], Any],
    seconds: float,
    repeat: int,
) -> list[float]:
    blob = os.urandom(1 << 20)

    def sync_task() -> int:
        for _ in range(10):
            get(submit())
        return 10

    def many_tasks() -> int:
        get([submit() for _ in range(1000)])
        return 1000

    def sync_actor() -> int:
        for _ in range(10):
            get(actor_call())
        return 10

    def many_actor() -> int:
        get([actor_call() for _ in range(1000)])
        return 1000

    def put_get() -> int:
        for _ in range(5):
            got = get(put(blob))
            assert len(got) == len(blob)
        return 5

    return [
        rate(b, seconds, repeat) for b in (sync_task, many_tasks, sync_actor, many_actor, put_get)
    ]


def wordcount_ours(mb: float) -> tuple[float, dict[str, int]]:
    import compute.tasks as tasks

    size = int(mb * 1e6 / CHUNKS)
    start = time.perf_counter()
    counts = [funcs.count.remote(SEED, i, size) for i in range(CHUNKS)]
    total = tasks.get(funcs.merge.remote(*counts))
    return time.perf_counter() - start, total


def run_ours(args: argparse.Namespace, workdir: Path) -> tuple[list[float], float, dict[str, int]]:
    import compute.tasks as tasks

    sock = workdir / "fwd.sock"
    env = {"PYTHONPATH": str(ROOT), "NDN_CLIENT_TRANSPORT": f"unix://{sock}"}
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)))
        fwd.wait_for("forwarder ready", stream="stderr")
        for n in ("e1", "e2"):
            ex = group.start(
                n,
                icn_argv(
                    "tasks",
                    "executor",
                    "--id",
                    n,
                    "--module",
                    "bench.tasks_funcs",
                    "--num-cpus",
                    "1",
                ),
                env=env,
            )
            ex.wait_for("tasks executor ready", stream="stdout", timeout=30)
        tasks.init(f"unix://{sock}")
        try:
            holder = funcs.HolderActor.remote()
            rates = patterns(
                funcs.empty.remote,
                tasks.get,
                holder.ping.remote,
                tasks.put,
                args.seconds,
                args.repeat,
            )
            secs, total = wordcount_ours(args.mb)
        finally:
            tasks.shutdown()
    return rates, secs, total


def run_ray(args: argparse.Namespace) -> list[float]:
    # Ray's token authentication (its default for a local cluster) writes ~/.ray/auth_token,
    # which later `ray start`s pick up; the cluster lives and dies inside this run, so none
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    try:
        empty = ray.remote(funcs.empty_fn)
        holder = ray.remote(funcs.Holder).remote()
        return patterns(
            empty.remote, ray.get, holder.ping.remote, ray.put, args.seconds, args.repeat
        )
    finally:
        ray.shutdown()


def run_dask(args: argparse.Namespace) -> tuple[float, float, dict[str, int]]:
    """Dask's word count with its defaults (dict results), then at its best (the counts
    pickled into bytes, which Dask moves in one piece): both times, and the counts."""
    from dask.distributed import Client, LocalCluster

    os.environ["PYTHONPATH"] = str(ROOT)
    size = int(args.mb * 1e6 / CHUNKS)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        client.submit(funcs.empty_fn).result()  # the workers up before the clock starts
        start = time.perf_counter()
        counts = client.map(funcs.count_fn, [SEED] * CHUNKS, range(CHUNKS), [size] * CHUNKS)
        total = client.submit(funcs.merge_list_fn, counts).result()
        plain = time.perf_counter() - start
        start = time.perf_counter()
        packed = client.map(funcs.count_pickled_fn, [SEED] * CHUNKS, range(CHUNKS), [size] * CHUNKS)
        best_total = client.submit(funcs.merge_pickled_fn, packed).result()
        best = time.perf_counter() - start
        assert best_total == total, "dask: the two forms disagree"
        return plain, best, total


def main(args: argparse.Namespace) -> None:
    size = int(args.mb * 1e6 / CHUNKS)
    expected = funcs.expected_total(SEED, CHUNKS, size)
    print(
        f"2 workers each (ours: 2 executors of 1 CPU + 1 forwarder; ray: num_cpus=2; dask: 2 "
        f"worker processes of 1 thread); rates: best of {args.repeat} x {args.seconds} s; "
        f"word count: {args.mb:g} MB in {CHUNKS} chunks, {expected} words",
        flush=True,
    )
    # Dask first and Ray last: a peer never runs while another's processes may still be
    # ending (Ray's take a moment after ray.shutdown())
    dask_plain, dask_secs, dask_total = run_dask(args)
    workdir = Path(tempfile.mkdtemp(prefix="icn-tasks-bench-"))
    try:
        ours, our_secs, our_total = run_ours(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert sum(our_total.values()) == expected, "ours: wrong word count"
    ray_rates = run_ray(args)
    assert dask_total == our_total, "dask and ours disagree"
    print(f"{'pattern':<20} {'ours /s':>10} {'ray /s':>10} {'ours/ray':>9}")
    for name, a, b in zip(PATTERNS, ours, ray_rates, strict=True):
        print(f"{name:<20} {a:>10,.0f} {b:>10,.0f} {a / b:>9.2f}")
    x = math.exp(sum(math.log(a / b) for a, b in zip(ours, ray_rates, strict=True)) / len(ours))
    y = our_secs / dask_secs
    print(
        f"word count {args.mb:g} MB ({funcs.describe(our_total)}; the same counts): ours "
        f"{our_secs:.2f} s, dask {dask_secs:.2f} s with the counts pickled (its best), "
        f"{dask_plain:.2f} s with dict results (its default: moved item by item)"
    )
    print(f"tasks ours/ray: {x:.2f}, wordcount ours/dask time: {y:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per timed round")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds per pattern (best kept)")
    ap.add_argument("--mb", type=float, default=100.0, help="MB of text to count")
    ap.add_argument("--quick", action="store_true", help="short rounds and 16 MB of text")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.repeat, a.mb = 0.5, 1, 16.0
    main(a)
