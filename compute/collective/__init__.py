"""Collective communication over named data (docs/design.md section 7).

Workers::

    from compute.collective import Collective, Plan

    plan = Plan.flat("/ar", ["0", "1", "2"], root="ps")     # or Plan.from_topology(...)
    async with Collective(plan, "1", endpoint) as coll:
        total = await coll.allreduce(gradient, "mean")

Aggregators (one per aggregator node of the plan, usually beside a forwarder)::

    agg = Aggregator(plan, "ps", endpoint)
    await agg.start()
"""

from compute.collective.aggregator import Aggregator
from compute.collective.errors import CollectiveError, PlanError
from compute.collective.ops import OPS
from compute.collective.plan import Plan
from compute.collective.ring import ring_reference
from compute.collective.worker import DEFAULT_CHUNK, LOCAL_CHUNK, SHARED_CHUNK, Collective

__all__ = [
    "DEFAULT_CHUNK",
    "LOCAL_CHUNK",
    "OPS",
    "SHARED_CHUNK",
    "Aggregator",
    "Collective",
    "CollectiveError",
    "Plan",
    "PlanError",
    "ring_reference",
]
