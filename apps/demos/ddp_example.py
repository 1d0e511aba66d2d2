"""Data-parallel training of a small torch MLP with DistributedDataParallel, over any
torch.distributed backend: ``icn`` (allreduce in the network, :mod:`apps.torch_backend`) or
``gloo``.  The script is a plain DDP script; only the backend's name changes.

The model is 64 -> hidden (tanh) -> 10 on scikit-learn's bundled digits (no download), the data
and batch schedule of :mod:`apps.demos.digits_mlp`: every step takes a global batch that is a pure
function of (seed, epoch, step), and rank r of N trains on the r-th of its N equal slices.  DDP
averages the gradients over the ranks, so each step applies the gradient of the whole global
batch whatever N, and a run over icn and one over gloo apply the same updates up to the order
in which float32 sums are taken.

Run it as one rank of a job (torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), or let it start the ranks itself:

    torchrun --nproc-per-node 4 apps/demos/ddp_example.py --backend icn --epochs 3
    python apps/demos/ddp_example.py --nproc 4 --backend icn --epochs 3 [--out summary.json]

Rank 0 prints the loss of each epoch (the mean over the global batches, one allreduce per
epoch) and the final accuracy on the held-out digits.  ``--out FILE`` writes a JSON summary:
losses, accuracy, a SHA-256 of the rank's final parameters and every rank's (gathered),
step times (per step the slowest rank's, from the forward pass to the optimizer's step) and
CPU time per step (all ranks' together, their threads included).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: the apps package is two folders up
    sys.path.insert(0, str(ROOT))

HOST = "127.0.0.1"
POLL = 0.05  # seconds between looks at the ranks, in launcher mode
STOP_GRACE = 5.0  # seconds a rank gets to exit on SIGTERM before SIGKILL


# ---- one rank ------------------------------------------------------------------------------


def param_hash(model: Any) -> bytes:
    """SHA-256 of the parameters' bytes, in the model's order: equal hashes, equal models."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.digest()


def make_model(hidden: int) -> Any:
    """64 -> ``hidden`` (tanh) -> 10, torch's default initialisation (seed it first)."""
    from torch import nn

    from apps.demos import digits_mlp

    return nn.Sequential(
        nn.Linear(digits_mlp.N_FEATURES, hidden),
        nn.Tanh(),
        nn.Linear(hidden, digits_mlp.N_CLASSES),
    )


def train(args: argparse.Namespace) -> dict[str, Any]:
    """One rank's run, from the process group's creation to its end; its summary, written to
    ``args.out`` if given."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    from apps.demos import digits_mlp

    torch.set_num_threads(1)  # ranks share the machine's cores: one thread each
    dist.init_process_group(backend=args.backend, init_method=args.init_method)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        config = digits_mlp.Config(seed=args.seed, batch_size=args.batch, hidden=args.hidden)
        digits_mlp.batch_indices(config, 0, rank, world)  # a batch that does not split: now
        data = digits_mlp.load_split(config)
        x_train = torch.tensor(data.x_train, dtype=torch.float32)
        y_train = torch.tensor(data.y_train, dtype=torch.int64)
        per_epoch = digits_mlp.steps_per_epoch(config)
        steps = args.steps or args.epochs * per_epoch

        # the same initial model at every rank (DDP broadcasts rank 0's anyway)
        torch.manual_seed(args.seed)
        model = make_model(args.hidden)
        ddp = DistributedDataParallel(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)

        losses: list[float] = []
        times: list[float] = []
        cpu: list[float] = []  # this process's CPU time in each step, its threads included
        loss_sum, in_epoch = 0.0, 0
        started = time.perf_counter()
        for step in range(steps):
            rows = torch.from_numpy(digits_mlp.batch_indices(config, step, rank, world))
            t0, c0 = time.perf_counter(), time.process_time()
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(x_train[rows]), y_train[rows])
            # DDP's hooks allreduce the gradient buckets as backward fills them
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            loss_sum += float(loss.item())
            in_epoch += 1
            if in_epoch == per_epoch or step == steps - 1:
                # equal slices: the mean of the ranks' slice losses is the global batch's loss
                total = torch.tensor([loss_sum, float(in_epoch)], dtype=torch.float64)
                dist.all_reduce(total)
                losses.append(float(total[0] / total[1]))
                if rank == 0:
                    print(f"epoch {len(losses)}: loss {losses[-1]:.4f}", flush=True)
                loss_sum, in_epoch = 0.0, 0
        took = time.perf_counter() - started

        with torch.no_grad():
            logits = model(torch.tensor(data.x_test, dtype=torch.float32))
            predicted = logits.argmax(dim=1).numpy()
        accuracy = float((predicted == data.y_test).mean())
        own = param_hash(model)
        mine = torch.frombuffer(bytearray(own), dtype=torch.uint8)
        hashes = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(hashes, mine)
        step_times = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(step_times, op=dist.ReduceOp.MAX)  # a step ends with its slowest rank
        slowest = [float(t) for t in step_times]
        step_cpu = torch.tensor(cpu, dtype=torch.float64)
        dist.all_reduce(step_cpu)  # what the step cost the machine: every rank's CPU
        summary = {
            "backend": args.backend,
            "rank": rank,
            "world_size": world,
            "seed": args.seed,
            "batch": args.batch,
            "steps": steps,
            "losses": losses,
            "accuracy": accuracy,
            "param_hash": own.hex(),  # this rank's, computed here
            "param_hashes": [bytes(h.tolist()).hex() for h in hashes],  # every rank's, gathered
            "step_times": slowest,
            "mean_step_time": statistics.fmean(slowest),
            "median_step_time": statistics.median(slowest),
            "step_cpu": [float(c) for c in step_cpu],
            "took": took,
        }
        if rank == 0:
            same = "identical" if len(set(summary["param_hashes"])) == 1 else "DIFFERENT"
            print(
                f"test accuracy {accuracy:.4f} (backend {args.backend}, {world} ranks, {steps} "
                f"steps, {1000 * summary['median_step_time']:.1f} ms per step; parameters "
                f"{same} at every rank)",
                flush=True,
            )
        if args.out:  # before the group's end: a rank that fails in teardown has written it
            write_summary(args.out, summary)
        return summary
    finally:
        dist.destroy_process_group()


def write_summary(out: str, summary: dict[str, Any]) -> None:
    """Rank 0 writes ``out``; with ``{rank}`` in it, every rank writes its own file."""
    if "{rank}" not in out and summary["rank"] != 0:
        return
    path = Path(out.replace("{rank}", str(summary["rank"])))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(path)  # a reader never sees half a file


# ---- launcher: start the ranks on this machine ---------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def rank_argv(argv: Sequence[str]) -> list[str]:
    """The launcher's arguments without ``--nproc``: what each rank runs with."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out


def stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every rank still running, then SIGKILL after ``STOP_GRACE``, by PID."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(max(0.0, deadline - time.monotonic()))
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait(STOP_GRACE)


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through launch()'s finally: the ranks are stopped


def launch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run ``args.nproc`` ranks of this script on 127.0.0.1 and wait for them all (at most
    ``args.timeout`` seconds).  A rank that fails stops the others; its exit code is ours."""
    env = {
        **os.environ,
        "MASTER_ADDR": HOST,
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(args.nproc),
        "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"),  # gloo over loopback
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    cmd = [sys.executable, str(Path(__file__).resolve()), *rank_argv(argv)]
    previous = signal.signal(signal.SIGTERM, _terminated)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for r in range(args.nproc):
            procs.append(subprocess.Popen(cmd, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}))
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            codes = [p.poll() for p in procs]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                r, code = failed[0]
                print(f"rank {r} exited with code {code}: stopping the others", file=sys.stderr)
                return code if code > 0 else 128 - code  # killed by signal -code: as a shell
            if all(c == 0 for c in codes):
                return 0
            time.sleep(POLL)
        print(
            f"the ranks did not finish within --timeout {args.timeout:g} s: stopped",
            file=sys.stderr,
        )
        return 124
    finally:
        stop(procs)
        signal.signal(signal.SIGTERM, previous)


# ---- command line --------------------------------------------------------------------------


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a positive integer")
    return value


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", default="icn", help="torch.distributed backend (icn, gloo)")
    ap.add_argument(
        "--init-method",
        default=None,
        help="rendezvous (default env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), or "
        "file:///shared/path?rank=R&world_size=N",
    )
    ap.add_argument("--epochs", type=positive, default=3)
    ap.add_argument("--steps", type=positive, default=None, help="steps in all (instead of epochs)")
    ap.add_argument("--batch", type=positive, default=64, help="global batch, split among ranks")
    ap.add_argument("--hidden", type=positive, default=32, help="hidden units")
    ap.add_argument("--lr", type=float, default=0.5, help="SGD learning rate")
    ap.add_argument("--seed", type=int, default=0, help="initial model and batch schedule")
    ap.add_argument("--out", help="JSON summary (written by rank 0; {rank} in it: every rank)")
    ap.add_argument("--nproc", type=int, default=0, help="start this many ranks on 127.0.0.1")
    ap.add_argument(
        "--timeout", type=float, default=600.0, help="launcher: seconds the ranks get in all"
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if args.seed < 0:
        raise SystemExit(f"--seed: must be >= 0, got {args.seed}")
    if args.nproc < 0:
        raise SystemExit(f"--nproc: must be >= 1 to start ranks (0: run as one), got {args.nproc}")
    if args.nproc:
        return launch(args, argv)
    if args.init_method is None and "RANK" not in os.environ:
        raise SystemExit(
            "RANK and WORLD_SIZE are not set: run under torchrun, or with --nproc N to start "
            "N ranks here"
        )
    train(args)
    if args.backend == "gloo":
        # out without the interpreter's teardown, the work done and written: torch's gloo
        # backend sometimes aborts in its static destructors ("terminate called without an
        # active exception", exit 134: 2 of 35 gloo runs of bench/ddp.py).  Other backends end
        # normally (a file store is removed by its destructor)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
