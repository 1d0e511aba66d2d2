"""Data-parallel training with torch's DistributedDataParallel over the ``icn`` backend.

    python examples/ddp_train.py

A plain DDP script: the one line that differs from a gloo or NCCL one is
``init_process_group(backend="icn")``.  Two ranks (processes, started here) train a small
linear model on their own halves of each batch for a few steps; DDP sums their gradients
through the network (rank 0 starts a forwarder with the job's aggregator and every rank joins
it).  Rank 0 prints the loss before and after, and both ranks check that they hold the same
parameters.  Needs torch (``pip install icn-net[torch]``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

WORLD = 2
STEPS = 5
BATCH = 64  # samples per step over all ranks


def rank_main(rank: int, store: str) -> None:
    # file:// is torch's rendezvous through a file (env:// under torchrun)
    dist.init_process_group(
        backend="icn", init_method=f"file://{store}", rank=rank, world_size=WORLD
    )
    try:
        torch.manual_seed(0)  # the same initial model at every rank (DDP checks it too)
        model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        true_weights = torch.arange(8, dtype=torch.float32)
        losses = []
        for step in range(STEPS):
            batch = torch.Generator().manual_seed(step)  # the same global batch at every rank
            x = torch.randn(BATCH, 8, generator=batch)
            mine = slice(rank * BATCH // WORLD, (rank + 1) * BATCH // WORLD)  # this rank's half
            loss = nn.functional.mse_loss(model(x[mine]).squeeze(1), x[mine] @ true_weights)
            optimizer.zero_grad()
            loss.backward()  # DDP's allreduce of the gradients runs over icn here
            optimizer.step()
            losses.append(loss.item())
        # every rank must now hold the same parameters: the max and min of a checksum agree
        checksum = torch.stack([p.detach().sum() for p in model.parameters()]).sum().reshape(1)
        low, high = checksum.clone(), checksum.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        if low.item() != high.item():
            raise SystemExit(f"rank {rank}: the ranks' parameters differ")
        if rank == 0:
            print(
                f"ddp over icn ok: {WORLD} ranks, {STEPS} steps, loss {losses[0]:.3f} -> "
                f"{losses[-1]:.3f}, identical parameters"
            )
    finally:
        dist.destroy_process_group()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="icn-ddp-") as tmp:
        store = str(Path(tmp) / "store")  # torch's rendezvous file
        # the ranks are processes of their own, joined here (an error if one failed); forked,
        # they inherit the imported torch instead of importing it again (seconds each)
        mp.start_processes(rank_main, args=(store,), nprocs=WORLD, start_method="fork")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # two ranks on a small machine
    main()
