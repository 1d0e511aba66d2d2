"""Collective members' Prometheus metrics, read from the counters they keep when a scrape asks.

Workers (:class:`~compute.collective.worker.Collective`) and aggregators
(:class:`~compute.collective.aggregator.Aggregator`) already count what they do in ``counters``
(their publisher's and fetcher's counts land there too); nothing is added to the chunk path.
Every family is labelled ``job`` (the plan's job prefix), ``member`` (worker or aggregator
node) and ``role`` (worker, aggregator): a process holds a few members, so the label sets
stay small.  Imported only by a process asked to serve metrics.

- ``icn_collective_rounds_total``: rounds a worker started, rounds an aggregator published;
- ``icn_collective_chunks_total{event}``: chunks published, aggregated, re-sent, bypassed,
  failed, validated, refused;
- ``icn_collective_bytes_total{direction}``: chunk bytes sent (first sends) and received;
- ``icn_collective_retries_total``: Interests for chunks sent again (expiry, Nack);
- ``icn_collective_recoveries_total{kind}``: what a member did to get past a loss or a fault:
  ``resent`` (a chunk sent again to a re-asking Interest), ``bypass`` (a silent child
  aggregator routed around), ``refused`` (a forged chunk asked again past caches);
- ``icn_collective_recovered_bytes_total``: bytes that came back after a retry;
- ``icn_collective_events_total{event}``: every counter a member keeps, by its name.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from compute.collective.aggregator import Aggregator
    from compute.collective.worker import Collective

    Member = Collective | Aggregator

LABELS = ["job", "member", "role"]
# icn_collective_chunks_total's event label -> the members' counter
CHUNK_EVENTS = {
    "published": "chunks_published",
    "aggregated": "chunks_aggregated",
    "resent": "chunks_resent",
    "bypassed": "chunks_bypassed",
    "failed": "chunks_failed",
    "validated": "chunks_validated",
    "refused": "chunks_refused",
}
RECOVERIES = {"resent": "chunks_resent", "bypass": "chunks_bypassed", "refused": "chunks_refused"}


def _identity(member: Member) -> tuple[list[str], int]:
    """The member's label values and the rounds it has seen."""
    from compute.collective.aggregator import Aggregator

    job = member.plan.job
    if isinstance(member, Aggregator):
        # rounds are numbered from 0 per job: the newest one published says how many were
        return [job, member.node, "aggregator"], member.publisher.newest_round + 1
    return [job, member.worker, "worker"], member.round


class CollectiveCollector(Collector):
    """Every collective member registered in one registry, read at scrape time.

    One collector per registry, not one per member: two collectors yielding the same family
    would print it twice, which Prometheus refuses.  Members are held weakly, so one closed and
    dropped by its process leaves the scrape."""

    def __init__(self) -> None:
        self.members: weakref.WeakSet[Member] = weakref.WeakSet()

    def describe(self) -> list[Metric]:
        return []  # the families' samples depend on the members present

    def collect(self) -> Iterator[Metric]:
        rounds = CounterMetricFamily(
            "icn_collective_rounds",
            "Rounds a worker started or an aggregator served",
            labels=LABELS,
        )
        chunks = CounterMetricFamily(
            "icn_collective_chunks", "Chunks by what happened to them", labels=[*LABELS, "event"]
        )
        octets = CounterMetricFamily(
            "icn_collective_bytes",
            "Chunk bytes sent (first sends) and received",
            labels=[*LABELS, "direction"],
        )
        retries = CounterMetricFamily(
            "icn_collective_retries", "Interests for chunks sent again", labels=LABELS
        )
        recoveries = CounterMetricFamily(
            "icn_collective_recoveries",
            "Chunks got past a loss or a fault, by how",
            labels=[*LABELS, "kind"],
        )
        recovered = CounterMetricFamily(
            "icn_collective_recovered_bytes",
            "Bytes that came back after a retried Interest",
            labels=LABELS,
        )
        events = CounterMetricFamily(
            "icn_collective_events",
            "Every counter a member keeps, by its name",
            labels=[*LABELS, "event"],
        )
        for member in sorted(self.members, key=lambda m: _identity(m)[0]):
            labels, n_rounds = _identity(member)
            c = member.counters
            rounds.add_metric(labels, n_rounds)
            for event, key in CHUNK_EVENTS.items():
                chunks.add_metric([*labels, event], c[key])
            octets.add_metric([*labels, "out"], c["bytes_sent"])
            octets.add_metric([*labels, "in"], c["bytes_received"])
            retries.add_metric(labels, c["interests_retransmitted"])
            for kind, key in RECOVERIES.items():
                recoveries.add_metric([*labels, kind], c[key])
            recovered.add_metric(labels, c["bytes_after_retx"])
            for key, value in sorted(c.items()):
                events.add_metric([*labels, key], value)
        yield from (rounds, chunks, octets, retries, recoveries, recovered, events)


_COLLECTORS: weakref.WeakKeyDictionary[CollectorRegistry, CollectiveCollector] = (
    weakref.WeakKeyDictionary()
)


def register_collective_metrics(member: Member, registry: CollectorRegistry) -> None:
    """Export ``member``'s counters (a worker's Collective or an Aggregator) in ``registry``;
    call it once per member, the first call in a registry adds the collector."""
    collector = _COLLECTORS.get(registry)
    if collector is None:
        collector = _COLLECTORS[registry] = CollectiveCollector()
        registry.register(collector)
    collector.members.add(member)
