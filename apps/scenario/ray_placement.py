"""Which Ray node runs each scenario node: the scenario's ``placement:`` first, then the rest
spread over the cluster (each to the Ray node with the fewest scenario nodes so far).

Decided once, before anything starts, from the cluster's live nodes as ``ray.nodes()`` lists
them; a placement that no live Ray node satisfies is refused then, naming the labels (or the
custom resources) that do exist.  The ray backend then pins each node's agent to its Ray node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apps.scenario.schema import PlacementSpec, Scenario
from icn.errors import ConfigError

# resources every Ray node reports: not what a placement means by a custom resource
BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
BUILTIN_PREFIXES = ("node:", "accelerator_type:")
NODE_ID_LABEL = "ray.io/node-id"  # one per node: named once, not listed with the others


@dataclass(frozen=True)
class RayNode:
    node_id: str
    address: str  # the address its processes bind and are reached at
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    resources: dict[str, float] = field(default_factory=dict, hash=False)

    @classmethod
    def from_ray(cls, info: dict[str, Any]) -> RayNode:
        """From one entry of ``ray.nodes()``."""
        return cls(
            node_id=str(info["NodeID"]),
            address=str(info["NodeManagerAddress"]),
            labels={str(k): str(v) for k, v in (info.get("Labels") or {}).items()},
            resources={str(k): float(v) for k, v in (info.get("Resources") or {}).items()},
        )

    def satisfies(self, spec: PlacementSpec) -> bool:
        pair = spec.label_pair
        if pair is not None:
            return self.labels.get(pair[0]) == pair[1]
        return self.resources.get(spec.resource or "", 0.0) > 0

    def custom_resources(self) -> list[str]:
        return [
            r
            for r in self.resources
            if r not in BUILTIN_RESOURCES and not r.startswith(BUILTIN_PREFIXES)
        ]


def live_nodes(infos: list[dict[str, Any]]) -> list[RayNode]:
    """The live nodes of a ``ray.nodes()`` answer, in a fixed order (by address, then id)."""
    nodes = [RayNode.from_ray(i) for i in infos if i.get("Alive")]
    return sorted(nodes, key=lambda n: (n.address, n.node_id))


def _unmet(node: str, spec: PlacementSpec, nodes: list[RayNode]) -> str:
    if spec.label is not None:
        labels = sorted(
            {f"{k}={v}" for n in nodes for k, v in n.labels.items() if k != NODE_ID_LABEL}
        )
        have = ", ".join(labels) if labels else "none (ray start --labels key=value sets some)"
        return (
            f"placement.{node}: no Ray node has the label {spec.label}; the labels are {have} "
            f"(and {NODE_ID_LABEL}=<id> on each node)"
        )
    resources = sorted({r for n in nodes for r in n.custom_resources()})
    have = ", ".join(resources) if resources else "none (ray start --resources sets some)"
    return (
        f"placement.{node}: no Ray node has the custom resource {spec.resource}; the custom "
        f"resources are {have}"
    )


def place(sc: Scenario, nodes: list[RayNode]) -> dict[str, RayNode]:
    """The Ray node of every scenario node; ConfigError naming every placement that no node
    satisfies, with what exists."""
    if not nodes:
        raise ConfigError("the Ray cluster has no live node: start one with ray start")
    load = {n.node_id: 0 for n in nodes}

    def least(candidates: list[RayNode]) -> RayNode:
        return min(candidates, key=lambda n: load[n.node_id])  # ties: the first, in order

    placed: dict[str, RayNode] = {}
    errors: list[str] = []
    for name in sc.nodes:
        spec = sc.placement.get(name)
        if spec is None:
            continue
        candidates = [n for n in nodes if n.satisfies(spec)]
        if not candidates:
            errors.append(_unmet(name, spec, nodes))
            continue
        placed[name] = chosen = least(candidates)
        load[chosen.node_id] += 1
    if errors:
        raise ConfigError("\n".join(errors))
    for name in sc.nodes:
        if name not in placed:
            placed[name] = chosen = least(nodes)
            load[chosen.node_id] += 1
    return {name: placed[name] for name in sc.nodes}
