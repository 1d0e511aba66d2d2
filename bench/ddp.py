"""Time per DistributedDataParallel training step: torch.distributed's backend icn against gloo,
the same script and data (apps/demos/ddp_example.py), same run.

For each rank count N, each of --repeat rounds runs the example once per backend, the order
alternating from round to round (icn first, then gloo first...) so neither always runs on a
machine the other just warmed or loaded.  A run is
``apps/demos/ddp_example.py --nproc N --steps S``:
N rank processes on 127.0.0.1, gloo over TCP, icn with the forwarder and aggregator its rank 0
starts (ICN_TORCH_PLAN unset).  A step is timed at each rank from the forward pass to the
optimizer's step (DDP's gradient allreduce included) and counts its slowest rank; the first
--warmup steps of a run are left out and the table shows the median of the other steps over
all rounds.  "compute" is the same step without DDP or any communication, one rank's slice of
the batch in this process: what the step would cost if the allreduce were free.

CPU of a step: every rank's, summed (each rank reads its own over the step), and for icn the
CPU of the forwarder-and-aggregator process its rank 0 starts, which does the allreduce's
network side: that process is read every 5 ms from /proc (its threads included) while the
run goes on, and its CPU over the run's kept steps (their span by the monotonic clock: from
rank 0's last ``epoch`` line back over the loop's time less the warm-up steps' share, the loss
reductions at epoch ends included) is divided among them.

Every run is checked: every rank ends with the same parameters (SHA-256 of each rank's, as the
example computes them), and icn's final loss equals gloo's to 1e-3 (relative; the sums are
taken in a different order).  A wrong result fails the benchmark; a run that fails (an exit
code, no end) is made once more, its output shown and the retry listed under the table.

The last line is ``ddp icn/gloo step time: X``, X the geometric mean over rank counts of icn's
median step time over gloo's (below 1 favours icn).

``--keep DIR`` keeps each backend's last run at each rank count in DIR: every rank's summary
(``{backend}-n{N}-{rank}.json``, as the example writes it with ``--out``) and the example's
output (``{backend}-n{N}.log``); the tests read them to check the training itself.

Run: .venv/bin/python bench/ddp.py [--ranks 2,4,8] [--steps 60] [--warmup 10] [--repeat 2]
     [--keep DIR]
Needs torch: pip install -e .[torch]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "apps" / "demos" / "ddp_example.py"
BACKENDS = ("icn", "gloo")
LOSS_RTOL = 1e-3
HIDDEN, LR = 32, 0.5  # the example's defaults
STOP_GRACE = 5.0  # seconds the example gets to stop its ranks on SIGTERM
HOST_MODULE = "apps.collective_host"  # the forwarder-and-aggregator process icn's rank 0 starts
SAMPLE_EVERY = 0.005  # seconds between two readings of that process's CPU
RETRIED: list[str] = []  # the runs that failed once


class BenchError(Exception):
    """A run failed twice, timed out or ended with a wrong result: the benchmark stops here."""


class RunFailed(BenchError):
    """The example exited with an error or did not end: the run is made once more."""


@dataclass
class Cell:
    """One backend at one rank count: the kept step times of all its rounds."""

    steps: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # every rank's CPU in each kept step, summed
    final_loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)  # wall time of each run, start-up included
    host: list[float] = field(default_factory=list)  # icn: its host's CPU per kept step, each run
    unmeasured: int = 0  # icn runs whose host's CPU could not be measured

    @property
    def median(self) -> float:
        return statistics.median(self.steps)

    @property
    def median_host(self) -> float:
        return statistics.median(self.host) if self.host else 0.0

    @property
    def median_cpu(self) -> float:
        """The ranks' CPU of a step (median) and their forwarder-and-aggregator's (icn)."""
        return statistics.median(self.cpu) + self.median_host


class HostWatch:
    """Reads, every ``SAMPLE_EVERY`` s, the CPU of the forwarder-and-aggregator process
    (``apps.collective_host``) that icn's rank 0 starts: found among the descendants of the
    example's process, its threads' CPU from /proc, stamped with ``time.perf_counter`` (the
    system's monotonic clock, the one the ranks time their steps with)."""

    def __init__(self, root: int) -> None:
        from bench.cpu import cpu_seconds  # every thread's, from schedstat

        self.root = root
        self._cpu = cpu_seconds
        self.samples: list[tuple[float, float]] = []  # (perf_counter, CPU seconds so far)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="host-cpu", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        pid = None
        while not self._done.wait(SAMPLE_EVERY):
            if pid is None:
                pid = find_descendant(self.root, HOST_MODULE)
                continue
            try:
                cpu = self._cpu(pid)
            except OSError:  # it ended: the run's steps are over
                return
            self.samples.append((time.perf_counter(), cpu))

    def cpu_between(self, t0: float, t1: float) -> float | None:
        """CPU seconds the process spent from ``t0`` to ``t1`` (interpolated between readings);
        None unless the readings cover that span."""
        return cpu_between(self.samples, t0, t1)


def cpu_between(samples: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """CPU spent from ``t0`` to ``t1`` by readings ``(time, CPU so far)`` in time order, each
    end interpolated between the readings around it; None unless they cover ``[t0, t1]``."""
    if not samples or t0 > t1 or t0 < samples[0][0] or t1 > samples[-1][0]:
        return None

    def at(t: float) -> float:
        i = bisect_left(samples, t, key=lambda s: s[0])
        if samples[i][0] == t or i == 0:
            return samples[i][1]
        (ta, ca), (tb, cb) = samples[i - 1], samples[i]
        return ca + (cb - ca) * (t - ta) / (tb - ta)

    return at(t1) - at(t0)


def find_descendant(root: int, module: str) -> int | None:
    """A process below ``root`` whose command line names ``module`` (Linux /proc)."""
    todo = [root]
    while todo:
        pid = todo.pop()
        kids: list[str] = []
        with contextlib.suppress(OSError):  # a process that ended has none
            for task in Path(f"/proc/{pid}/task").iterdir():  # each thread's children
                with contextlib.suppress(OSError):
                    kids += (task / "children").read_text().split()
        for kid in map(int, kids):
            try:
                argv = Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if module.encode() in argv:
                return kid
            todo.append(kid)
    return None


def kept_span(end: float, took: float, step_times: list[float], warmup: int) -> tuple[float, float]:
    """When the kept steps ran, by the monotonic clock: the loop of ``took`` seconds ended at
    ``end``; its first ``warmup`` steps took their share of it (``step_times``: each step's)."""
    start = end - took
    return start + took * sum(step_times[:warmup]) / sum(step_times), end


class Lines:
    """Copies the example's output to ``log`` and stamps the lines rank 0 prints at each epoch's
    end (``epoch N: loss ...``, the last one right after the last step) with perf_counter."""

    def __init__(self, stream: Any, log: Any) -> None:
        self.epochs: list[float] = []
        self._thread = threading.Thread(target=self._run, args=(stream, log), daemon=True)
        self._thread.start()

    def _run(self, stream: Any, log: Any) -> None:
        for raw in iter(stream.readline, b""):
            at = time.perf_counter()
            line = raw.decode(errors="replace")
            if line.startswith("epoch "):
                self.epochs.append(at)
            log.write(line)
            log.flush()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def run_example(backend: str, n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One run of the example with ``n`` ranks; rank 0's summary, checked."""
    out = workdir / f"{backend}-n{n}-{{rank}}.json"
    paths = [Path(str(out).replace("{rank}", str(r))) for r in range(n)]
    for path in paths:  # a kept summary of an earlier round is not this run's
        path.unlink(missing_ok=True)
    argv = [sys.executable, str(EXAMPLE), "--nproc", str(n), "--backend", backend]
    argv += ["--steps", str(args.steps), "--batch", str(args.batch), "--seed", str(args.seed)]
    argv += ["--out", str(out), "--timeout", str(args.timeout)]
    # no plan, no forwarder named: rank 0 starts a forwarder with the aggregator in it
    unset = ("ICN_TORCH_", "NDN_CLIENT_TRANSPORT")
    env = {k: v for k, v in os.environ.items() if not k.startswith(unset)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    log = workdir / f"{backend}-n{n}.log"
    started = time.monotonic()
    with open(log, "w+") as output:
        proc = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        lines = Lines(proc.stdout, output)
        # in gloo's runs too, which have no such process: both bear the watch's small cost
        host = HostWatch(proc.pid)
        try:
            # the example bounds its ranks by --timeout; ours is a last bound on the example
            code = proc.wait(args.timeout + STOP_GRACE * 2)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            stop(proc)  # the example stops its ranks by PID on SIGTERM
            host.stop()
            lines.join(STOP_GRACE)
        output.seek(0)
        text = output.read()
    took = time.monotonic() - started
    if code != 0:
        why = "no end in time" if code is None else f"exit code {code}"
        raise RunFailed(f"{backend} N={n}: the example failed ({why}):\n{text[-4000:]}")
    summaries = [json.loads(path.read_text()) for path in paths]
    own = {s["param_hash"] for s in summaries}
    if len(own) != 1 or set(summaries[0]["param_hashes"]) != own:
        raise BenchError(f"{backend} N={n}: the ranks' final parameters differ")
    summary: dict[str, Any] = summaries[0]
    summary["wall"] = took
    summary["host_step_cpu"] = None  # gloo: no process besides the ranks
    if backend == "icn" and lines.epochs:
        t0, t1 = kept_span(lines.epochs[-1], summary["took"], summary["step_times"], args.warmup)
        spent = host.cpu_between(t0, t1)
        if spent is not None:
            summary["host_step_cpu"] = spent / (len(summary["step_times"]) - args.warmup)
    return summary


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after ``STOP_GRACE``, by PID."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_GRACE)


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(f"stopped by signal {signum}; the example stops its ranks")


def compute_only(n: int, args: argparse.Namespace) -> float:
    """Median time of one rank's step without DDP: its slice of the batch, no allreduce."""
    import torch
    import torch.nn.functional as F

    from apps.demos import ddp_example, digits_mlp

    torch.set_num_threads(1)
    config = digits_mlp.Config(seed=args.seed, batch_size=args.batch)
    data = digits_mlp.load_split(config)
    x = torch.tensor(data.x_train, dtype=torch.float32)
    y = torch.tensor(data.y_train, dtype=torch.int64)
    torch.manual_seed(args.seed)
    model = ddp_example.make_model(HIDDEN)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    times = []
    for step in range(args.steps):
        rows = torch.from_numpy(digits_mlp.batch_indices(config, step, 0, n))
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x[rows]), y[rows]).backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[args.warmup :])


def run_twice(backend: str, n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A run, made again once if it failed (a rank of gloo once aborted in its teardown,
    after its last step, on a loaded machine); each failure is shown and counted."""
    try:
        return run_example(backend, n, args, workdir)
    except RunFailed as exc:
        print(f"  run failed, made again: {exc}", file=sys.stderr, flush=True)
        RETRIED.append(f"{backend} N={n}")
        return run_example(backend, n, args, workdir)


def measure(args: argparse.Namespace, workdir: Path) -> dict[int, dict[str, Cell]]:
    cells: dict[int, dict[str, Cell]] = {}
    for n in args.ranks:
        cells[n] = {b: Cell() for b in BACKENDS}
        for rnd in range(args.repeat):
            order = BACKENDS if rnd % 2 == 0 else BACKENDS[::-1]
            for backend in order:
                s = run_twice(backend, n, args, workdir)
                cell = cells[n][backend]
                cell.steps += s["step_times"][args.warmup :]
                cell.cpu += s["step_cpu"][args.warmup :]
                cell.final_loss.append(s["losses"][-1])
                cell.accuracy.append(s["accuracy"])
                cell.runs.append(s["wall"])
                if s["host_step_cpu"] is not None:
                    cell.host.append(s["host_step_cpu"])
                elif backend == "icn":
                    cell.unmeasured += 1
                kept = statistics.median(s["step_times"][args.warmup :])
                print(
                    f"  N={n} {backend}: median step {1000 * kept:.2f} ms, "
                    f"run {s['wall']:.1f} s, final loss {s['losses'][-1]:.5f}",
                    file=sys.stderr,
                    flush=True,
                )
        icn, gloo = cells[n]["icn"], cells[n]["gloo"]
        for a, b in zip(icn.final_loss, gloo.final_loss, strict=True):
            if abs(a - b) > LOSS_RTOL * abs(b):
                raise BenchError(f"N={n}: icn's final loss {a:.6f} differs from gloo's {b:.6f}")
    return cells


def print_table(cells: dict[int, dict[str, Cell]], compute: dict[int, float]) -> list[float]:
    head = (
        f"{'ranks':>5} | {'compute':>7} | {'gloo ms':>7} {'cpu':>5} | {'icn ms':>7} {'cpu':>5} | "
        f"{'icn/gloo':>8} | {'run s: gloo':>11} {'icn':>5} | {'accuracy':>8}"
    )
    print(head)
    print("-" * len(head))
    ratios = []
    unmeasured: list[str] = []
    hosts: list[str] = []  # icn's forwarder-and-aggregator's part of its cpu, by rank count
    for n, by in cells.items():
        icn, gloo = by["icn"], by["gloo"]
        ratio = icn.median / gloo.median
        ratios.append(ratio)
        hosts.append(f"N={n} " + (f"{1000 * icn.median_host:.1f}" if icn.host else "n/a"))
        if icn.unmeasured:
            unmeasured.append(f"N={n}: {icn.unmeasured} of {len(icn.runs)} runs")
        print(
            f"{n:>5} | {1000 * compute[n]:>7.2f} | {1000 * gloo.median:>7.2f} "
            f"{1000 * gloo.median_cpu:>5.1f} | {1000 * icn.median:>7.2f} "
            f"{1000 * icn.median_cpu:>5.1f} | {ratio:>8.2f} | "
            f"{statistics.median(gloo.runs):>11.1f} {statistics.median(icn.runs):>5.1f} | "
            f"{statistics.median(icn.accuracy):>8.4f}"
        )
    print(
        "ms: median time of a training step (forward, backward with DDP's allreduce, SGD step),\n"
        "  a step counting its slowest rank, warm-up steps left out, all rounds pooled\n"
        "cpu: median CPU ms of a step, every rank's together (their threads included), and for\n"
        "  icn its forwarder-and-aggregator process's too (its CPU over the kept steps of a run,\n"
        "  per step, median over runs; read every 5 ms from /proc)\n"
        "compute: ms of the same step without DDP, one rank's slice, in one process\n"
        "run s: wall time of a whole run (median over rounds), process start-up included\n"
        "accuracy: icn's on the held-out digits (gloo's final loss equal to 1e-3, checked)"
    )
    print("of icn's cpu, its forwarder-and-aggregator process's, ms: " + ", ".join(hosts))
    if unmeasured:
        print(
            "icn runs whose host CPU could not be measured (not in its cpu): "
            + ", ".join(unmeasured)
        )
    return ratios


def main(args: argparse.Namespace) -> None:
    try:
        import torch
    except ImportError:
        raise SystemExit("bench/ddp.py needs torch: pip install -e .[torch]") from None
    for n in args.ranks:
        if args.batch % n:
            raise SystemExit(f"--batch {args.batch} is not divisible by {n} ranks")
    if args.warmup >= args.steps:
        raise SystemExit(f"--warmup {args.warmup} leaves no step of --steps {args.steps} to time")
    started = time.monotonic()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        cells = measure(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="icn-bench-ddp-") as tmp:
            cells = measure(args, Path(tmp))
    compute = {n: compute_only(n, args) for n in args.ranks}
    elapsed = time.monotonic() - started
    print(
        f"DDP training step, digits MLP 64-32-10 (2410 float32 parameters, one gradient bucket),"
        f"\nglobal batch {args.batch}; Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, one thread per rank\n"
        f"icn: forwarder and aggregator started by rank 0, Unix sockets; gloo: TCP 127.0.0.1\n"
        f"{args.repeat} rounds per rank count, backends alternating, {args.steps} steps per run "
        f"({args.warmup} warm-up); run took {elapsed:.0f} s"
    )
    ratios = print_table(cells, compute)
    if RETRIED:
        again = ", ".join(RETRIED)
        print(f"runs that failed once and were made again (their output on stderr): {again}")
    print(f"ddp icn/gloo step time: {statistics.geometric_mean(ratios):.2f}")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a positive integer")
    return value


if __name__ == "__main__":
    if str(ROOT) not in sys.path:  # run as a script: apps sits beside bench
        sys.path.insert(0, str(ROOT))
    from bench.arguments import parse_ints  # the rank-count list, as the allreduce benches read it

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ranks", type=parse_ints, default=[2, 4, 8], help="rank counts")
    ap.add_argument("--steps", type=positive, default=60, help="training steps per run")
    ap.add_argument("--warmup", type=int, default=10, help="first steps of a run left out")
    ap.add_argument("--repeat", type=positive, default=2, help="runs per backend and rank count")
    ap.add_argument("--batch", type=positive, default=64, help="global batch")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run at most")
    ap.add_argument(
        "--keep",
        type=Path,
        help="keep each backend's last run here: its ranks' summaries and the example's output",
    )
    signal.signal(signal.SIGTERM, _terminated)  # unwinds through run_example: example stopped
    try:
        main(ap.parse_args())
    except BenchError as exc:
        sys.exit(f"FAILED: {exc}")
    except KeyboardInterrupt:
        sys.exit("interrupted; the example stops its ranks")
