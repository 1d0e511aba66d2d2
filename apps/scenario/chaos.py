"""Seeded random faults: a scenario's ``chaos:`` block expanded into ordinary timed faults.

The expansion is a pure function of the validated scenario (its seed, spans, eligible targets,
links and services), so a file always gives the same faults, ``icn scenario validate`` can
print them before anything starts, and the runner plays them like faults written by hand.

An episode is a fault and its undoing: ``node_kill_restart`` (kill a node, restart it),
``service_kill_restart`` (the same for one service), ``link_cut`` (cut, restore) and ``loss``
(a link's loss raised to ``chaos.loss``, then set back to the link's own).  Episodes whose
scopes meet never overlap and keep :data:`SETTLE` seconds apart: a node's scope holds its
services and links, so no service or link of a dead node is faulted, and no fault is undone
while another holds the same thing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from apps.scenario.schema import ChaosKind, FaultSpec, Scenario

SETTLE = 2.0  # seconds between two episodes on the same scope (a restart takes a moment)
RESOLUTION = 0.1  # times are drawn to a tenth of a second, so the plan reads easily

Target = str | tuple[str, str]


@dataclass(frozen=True)
class Episode:
    kind: ChaosKind
    target: Target
    start: float
    end: float
    scope: frozenset[str]

    @property
    def target_text(self) -> str:
        t = self.target
        return t if isinstance(t, str) else f"{t[0]}-{t[1]}"

    def describe(self) -> str:
        return f"{self.start:7.1f}s to {self.end:7.1f}s  {self.kind} {self.target_text}"


def _scope(sc: Scenario, kind: ChaosKind, target: Target) -> frozenset[str]:
    if kind == "node_kill_restart":
        assert isinstance(target, str)
        return frozenset(
            [f"node:{target}"]
            + [f"svc:{s.name}" for s in sc.services if s.node == target]
            + [f"link:{ln.name}" for ln in sc.links if target in ln.between]
        )
    if kind == "service_kill_restart":
        return frozenset([f"svc:{target}"])
    assert isinstance(target, tuple)
    link = sc.link_between(*target)
    assert link is not None  # validated
    return frozenset([f"link:{link.name}"])


def _targets(sc: Scenario, kind: ChaosKind) -> list[Target]:
    chaos = sc.chaos
    assert chaos is not None
    if kind == "node_kill_restart":
        return list(chaos.nodes)
    if kind == "service_kill_restart":
        return list(chaos.services)
    return [(a, b) for a, b in chaos.links]


def _draw(rng: random.Random, span: tuple[float, float]) -> float:
    lo, hi = span
    return max(RESOLUTION, round(rng.uniform(lo, hi), 1))


def episodes(sc: Scenario) -> list[Episode]:
    """The episodes ``sc.chaos`` draws, in start order (none without a chaos block).

    From ``start``, the next episode starts an ``interval`` after the previous one's start;
    its kind is drawn among the kinds with a target free at that time, its target among those,
    its length from ``down_for`` (``loss_for`` for loss).  A slot where nothing is free, or
    whose episode would not be over by ``end``, passes with no episode.
    """
    chaos = sc.chaos
    if chaos is None:
        return []
    rng = random.Random(chaos.seed)
    end = sc.duration if chaos.end is None else chaos.end
    out: list[Episode] = []
    t = chaos.start
    while True:
        t = round(t + _draw(rng, chaos.interval), 1)
        if t >= end:
            break
        busy = frozenset().union(*(e.scope for e in out if e.end + SETTLE > t))
        free: dict[ChaosKind, list[Target]] = {
            kind: [x for x in _targets(sc, kind) if not _scope(sc, kind, x) & busy]
            for kind in chaos.kinds
        }
        kinds = [k for k in chaos.kinds if free[k]]
        if not kinds:
            continue
        kind = rng.choice(kinds)
        target = rng.choice(free[kind])
        length = _draw(rng, chaos.loss_for if kind == "loss" else chaos.down_for)
        if t + length >= end:
            continue
        out.append(Episode(kind, target, t, round(t + length, 1), _scope(sc, kind, target)))
    return out


def episode_faults(sc: Scenario, ep: Episode) -> list[FaultSpec]:
    """The two faults of ``ep``: the fault at its start and its undoing at its end."""
    chaos = sc.chaos
    assert chaos is not None
    target = ep.target
    if ep.kind in ("node_kill_restart", "service_kill_restart"):
        pair = [{"at": ep.start, "kill": target}, {"at": ep.end, "restart": target}]
    elif ep.kind == "link_cut":
        pair = [{"at": ep.start, "cut": target}, {"at": ep.end, "restore": target}]
    else:
        assert isinstance(target, tuple)
        link = sc.link_between(*target)
        assert link is not None  # validated
        pair = [
            {"at": ep.start, "shape": target, "loss": chaos.loss},
            {"at": ep.end, "shape": target, "loss": link.loss},
        ]
    return [FaultSpec.model_validate(f) for f in pair]


def chaos_faults(sc: Scenario) -> list[FaultSpec]:
    """Every fault of every episode, in time order."""
    faults = [f for ep in episodes(sc) for f in episode_faults(sc, ep)]
    return sorted(faults, key=lambda f: f.at)


def plan_lines(sc: Scenario) -> list[str]:
    """What the chaos block draws, for a person: a header line, then one line per episode."""
    chaos = sc.chaos
    if chaos is None:
        return []
    eps = episodes(sc)
    counts = {k: sum(1 for e in eps if e.kind == k) for k in chaos.kinds}
    what = ", ".join(f"{n} {k}" for k, n in counts.items())
    head = f"chaos (seed {chaos.seed}): {len(eps)} episodes, {2 * len(eps)} faults ({what})"
    return [head, *(f"  {e.describe()}" for e in eps)]
