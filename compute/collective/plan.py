"""Who sums what: the aggregation tree of a job.

A plan lists the workers (their order is their rank), the aggregators and, for each aggregator,
its children in the order it folds them: workers or other aggregators.  The root aggregator
publishes ``/<job>/sum``; the others publish ``/<job>/agg/<node>``.  :meth:`Plan.from_topology`
builds the tree along the network's shortest paths, so partial sums travel the links that
Interests for the sum take anyway; :meth:`Plan.flat` is the parameter-server shape (one
aggregator, every worker its child).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.collective.errors import PlanError
from compute.collective.names import JobNames, check_member_name
from compute.collective.ops import check_op, finish, fold
from icn.errors import ConfigError


@dataclass(frozen=True)
class Plan:
    """Who takes part in a collective job and how sums flow: the job's name prefix, its
    workers (rank order), and a tree of aggregators from ``root`` down, each listing its
    children in the order it folds them (so every run sums in the same order).  Make one with
    :meth:`flat`, :meth:`tree`, :meth:`from_topology` or :meth:`from_dict`; PlanError names
    what is inconsistent."""

    job: str
    workers: tuple[str, ...]
    root: str
    children: Mapping[str, tuple[str, ...]]  # aggregator -> its children, in folding order

    def __post_init__(self) -> None:
        self.validate()

    # ---- construction ----------------------------------------------------------------------

    @classmethod
    def flat(cls, job: str, workers: Sequence[str], root: str = "ps") -> Plan:
        """One aggregator (``root``) whose children are all the workers, in order."""
        return cls(job, tuple(workers), root, {root: tuple(workers)})

    @classmethod
    def tree(cls, job: str, workers: Sequence[str], fan_in: int) -> Plan:
        """A balanced tree of aggregators ``agg0``, ``agg1``... with at most ``fan_in``
        children each (placement left to the caller)."""
        if fan_in < 2:
            raise PlanError("fan_in: must be at least 2")
        level: list[str] = list(workers)
        children: dict[str, tuple[str, ...]] = {}
        while True:
            groups = [level[i : i + fan_in] for i in range(0, len(level), fan_in)]
            names = [f"agg{len(children) + i}" for i in range(len(groups))]
            for name, group in zip(names, groups, strict=True):
                children[name] = tuple(group)
            if len(names) == 1:
                return cls(job, tuple(workers), names[0], children)
            level = names

    @classmethod
    def from_topology(
        cls,
        job: str,
        links: Iterable[tuple[str, str]],
        workers: Mapping[str, str],
        aggregators: Sequence[str],
        root: str | None = None,
    ) -> Plan:
        """The tree along shortest paths of the graph ``links``: ``workers`` maps each worker
        to the node it runs on, ``aggregators`` are nodes with an aggregator.  The root is
        ``root`` or the aggregator with the least total distance to the workers; every other
        aggregator, and every worker, hangs from the first aggregator on its path to the root
        (its own node first: a worker beside an aggregator is its child)."""
        # imported here: networkx costs a process ~120 ms to load, and only planning needs it
        import networkx as nx  # type: ignore[import-untyped]

        graph = nx.Graph()
        graph.add_edges_from(links)
        graph.add_nodes_from(workers.values())
        graph.add_nodes_from(aggregators)
        if not aggregators:
            raise PlanError("aggregators: a plan needs at least one aggregator node")
        if len(set(aggregators)) != len(aggregators):
            raise PlanError("aggregators: a node is listed twice")
        if root is None:
            lengths = {a: nx.single_source_shortest_path_length(graph, a) for a in aggregators}

            def cost(a: str) -> tuple[float, float, str]:
                # least total distance, then least farthest worker (a shallower tree)
                hops = [lengths[a].get(n, float("inf")) for n in workers.values()]
                return (sum(hops), max(hops), a)

            root = min(aggregators, key=cost)
        elif root not in aggregators:
            raise PlanError(f"root: {root!r} is not one of the aggregators {list(aggregators)}")
        agg_set = set(aggregators)

        def parent_of(node: str, skip_self: bool) -> str:
            try:
                path = nx.shortest_path(graph, node, root)
            except nx.NetworkXNoPath:
                raise PlanError(f"node {node!r} has no path to the root {root!r}") from None
            for hop in path[1:] if skip_self else path:
                if hop in agg_set:
                    return str(hop)
            raise AssertionError("the root is an aggregator")

        children: dict[str, list[str]] = {a: [] for a in aggregators}
        for agg in sorted(agg_set - {root}):
            children[parent_of(agg, skip_self=True)].append(agg)
        for worker, node in workers.items():
            children[parent_of(node, skip_self=False)].append(worker)
        kept = {a: tuple(c) for a, c in children.items() if c or a == root}
        return cls(job, tuple(workers), root, kept)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """From the form :meth:`to_dict` writes (a scenario's or a config file's ``plan:``)."""
        try:
            job = str(data["job"])
            workers = tuple(str(w) for w in data["workers"])
            root = str(data["root"])
            raw = data["aggregators"]
        except KeyError as exc:
            raise PlanError(f"plan: missing field {exc.args[0]!r}") from None
        except TypeError:
            raise PlanError("plan: workers must be a list of worker ids") from None
        if not isinstance(raw, Mapping):
            raise PlanError("plan.aggregators: must map each aggregator to its children")
        children = {str(k): tuple(str(c) for c in v) for k, v in raw.items()}
        return cls(job, workers, root, children)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping, the form :meth:`from_dict` reads."""
        return {
            "job": self.job,
            "workers": list(self.workers),
            "root": self.root,
            "aggregators": {k: list(v) for k, v in self.children.items()},
        }

    # ---- checks ----------------------------------------------------------------------------

    def validate(self) -> None:
        """PlanError unless every name is valid and the aggregators form one tree over all
        the workers (run when a plan is made)."""
        try:
            JobNames(self.job)
            for w in self.workers:
                check_member_name("worker", w)
            for a in self.children:
                check_member_name("aggregator", a)
        except ConfigError as exc:
            raise PlanError(str(exc)) from None
        if not self.workers:
            raise PlanError("workers: a job needs at least one worker")
        if len(set(self.workers)) != len(self.workers):
            raise PlanError("workers: a worker id is listed twice")
        clash = set(self.workers) & set(self.children)
        if clash:
            raise PlanError(f"{sorted(clash)}: both a worker and an aggregator; rename one")
        if self.root not in self.children:
            raise PlanError(f"root: {self.root!r} is not an aggregator of the plan")
        seen: dict[str, str] = {}
        for agg, kids in self.children.items():
            for kid in kids:
                if kid not in self.children and kid not in self.workers:
                    raise PlanError(f"aggregators.{agg}: {kid!r} is neither a worker nor an agg")
                if kid in seen:
                    raise PlanError(f"{kid!r} is a child of both {seen[kid]} and {agg}")
                seen[kid] = agg
        missing = [w for w in self.workers if w not in seen]
        if missing:
            raise PlanError(f"workers {missing} are under no aggregator; add them to one")
        order = self.subtree(self.root)  # also finds cycles
        unreachable = set(self.children) - set(order)
        if unreachable:
            raise PlanError(f"aggregators {sorted(unreachable)} do not lead to the root")

    # ---- questions ---------------------------------------------------------------------------

    def is_aggregator(self, name: str) -> bool:
        """Whether ``name`` is one of the plan's aggregators."""
        return name in self.children

    def subtree(self, node: str) -> list[str]:
        """``node`` and everything under it, depth first in folding order."""
        out: list[str] = []
        stack = [node]
        while stack:
            n = stack.pop()
            if n in out:
                raise PlanError(f"aggregators: {n!r} is its own descendant (a cycle)")
            out.append(n)
            stack.extend(reversed(self.children.get(n, ())))
        return out

    def workers_under(self, node: str) -> list[str]:
        """The workers whose sums go through ``node``, in folding order."""
        return [n for n in self.subtree(node) if n not in self.children]

    def aggregators(self) -> list[str]:
        """Every aggregator, from the root down, depth first."""
        return [n for n in self.subtree(self.root) if n in self.children]

    def reference(
        self, arrays: Mapping[str, np.ndarray[Any, Any]], op: str
    ) -> np.ndarray[Any, Any]:
        """What every worker gets: each aggregator folds its children in order (numpy), and
        the mean divides the total by the number of workers."""
        check_op(op)

        def value(node: str) -> np.ndarray[Any, Any]:
            if node not in self.children:
                return np.asarray(arrays[node])
            return fold([value(kid) for kid in self.children[node]], op)

        return finish(value(self.root), op, len(self.workers))
