"""Which of a scenario's nodes share a forwarder process, and how long they get to be ready.

A forwarder process costs its interpreter and modules (about 35 MB, 0.3 s of CPU to start) and
a forwarder in it almost nothing more (well under 1 MB idle), so a hundred nodes as a hundred
processes need 3.5 GB and 24 s to be ready on 2 cores, where a hundred nodes in four processes
need 235 MB and 1.2 s.  ``nodes_per_process`` in a scenario says how many nodes one
process hosts (1: a process per node); left out, small scenarios keep a process per node and
larger ones are packed (:data:`AUTO_PACK_ABOVE`, :data:`AUTO_NODES_PER_PROCESS`).

Packing is the local backend's: on netns every node is a network namespace, its own machine,
and a process lives in one namespace (a forwarder would have to open each socket, including
the TCP faces it makes on demand, inside another node's namespace), so netns keeps a process
per node and refuses ``nodes_per_process`` above 1 (:func:`refusal`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# Measured with bench/scale.py on 2 shared cores (docs/guides/scenarios.md, "A hundred
# nodes"): 16 nodes took 5.0 s to be ready and 38 MB each as processes of their own, 0.7 s
# and 6 MB each in one; the shipped scenarios of 7 nodes or fewer keep a process per node,
# with its cores for heavy services.  At
# 100 nodes, 10 per process took 2.1 s and 4.4 MB per node, 25 took 1.2 s and 2.3 MB, 50 took
# 1.3 s and 1.7 MB: 25 keeps four processes busy on four cores for a little more memory.
AUTO_PACK_ABOVE = 16
AUTO_NODES_PER_PROCESS = 25

# The readiness wait: what one process needed on a loaded machine, plus the CPU each process
# and each node adds to a start-up that runs on a couple of cores.
READY_TIMEOUT_BASE = 20.0
READY_PER_PROCESS = 0.5
READY_PER_NODE = 0.05


def refusal(backend: str, wanted: int) -> str | None:
    """Why ``backend`` cannot host ``wanted`` nodes per process, and the fix; None when it
    can."""
    if wanted <= 1 or backend == "local":
        return None
    why = (
        "every node is a network namespace and a process lives in one"
        if backend == "netns"
        else "it places one forwarder per process"
    )
    return (
        f"the {backend} backend runs one node per process ({why}); set nodes_per_process: 1, "
        "or use backend: local"
    )


def per_process(wanted: int | None, n_nodes: int, backend: str) -> int:
    """How many nodes one process hosts: ``wanted`` when the scenario says, else 1 up to
    :data:`AUTO_PACK_ABOVE` nodes (and always off the local backend), else
    :data:`AUTO_NODES_PER_PROCESS`.  ValueError (:func:`refusal`'s text) when ``backend``
    cannot pack."""
    if wanted is None:
        return AUTO_NODES_PER_PROCESS if backend == "local" and n_nodes > AUTO_PACK_ABOVE else 1
    why = refusal(backend, wanted)
    if why is not None:
        raise ValueError(f"nodes_per_process: {wanted}: {why}")
    return wanted


def plan_groups(nodes: Sequence[str], per: int) -> list[list[str]]:
    """``nodes`` in scenario order, cut into the fewest groups of at most ``per`` and of sizes
    that differ by one at most (100 nodes at 30 per process: 25, 25, 25, 25, not 30, 30, 30,
    10): the processes share the cores evenly."""
    if per < 1:
        raise ValueError(f"nodes per process must be at least 1, got {per}")
    if not nodes:
        return []
    count = math.ceil(len(nodes) / per)
    base, extra = divmod(len(nodes), count)
    groups: list[list[str]] = []
    at = 0
    for i in range(count):
        size = base + (1 if i < extra else 0)
        groups.append(list(nodes[at : at + size]))
        at += size
    return groups


def ready_timeout(n_nodes: int, n_processes: int) -> float:
    """Seconds the forwarders started together get to say they are ready."""
    return READY_TIMEOUT_BASE + READY_PER_PROCESS * n_processes + READY_PER_NODE * n_nodes


def not_ready_text(
    ready: Sequence[str],
    waiting: Sequence[str],
    failed: Mapping[str, str],
    timeout: float | None,
) -> str:
    """The error of a start-up that did not finish: how many nodes were ready, which were not
    (``waiting``: still starting when ``timeout`` ran out, or when another failed (``timeout``
    None); ``failed``, with a reason) and the first reason in full."""
    total = len(ready) + len(waiting) + len(failed)
    head = f"{len(ready)} of {total} forwarders ready"
    parts = []
    if waiting:
        when = "still starting" if timeout is None else f"not ready within {timeout:g} s"
        parts.append(f"{when}: {', '.join(waiting)}")
    if failed:
        parts.append(f"failed: {', '.join(failed)}")
    text = f"{head}; {'; '.join(parts)}"
    if failed:
        node, why = next(iter(failed.items()))
        text += f"\n{node}: {why}"
    return text
