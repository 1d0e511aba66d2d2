"""An RMI server's Prometheus metrics, read from what it keeps when a scrape asks.

``icn_rmi_calls_total{function, outcome}`` and ``icn_rmi_call_duration_seconds`` (a histogram
per function) from :class:`~compute.rmi.stats.CallStats`; ``icn_rmi_calls_in_progress``; and
every counter of the server (refusals, sessions, memo hits, thunks...) as
``icn_rmi_events_total{event}``.  Imported only by a process asked to serve metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from compute.rmi.server import RmiServer


class RmiCollector(Collector):
    def __init__(self, server: RmiServer) -> None:
        self.server = server

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "icn_rmi_calls",
            "Calls finished, by function and outcome",
            labels=["function", "outcome"],
        )
        durations = HistogramMetricFamily(
            "icn_rmi_call_duration_seconds",
            "Time from a call's start to its result, by function",
            labels=["function"],
        )
        for name, stats in sorted(self.server.stats.functions.items()):
            calls.add_metric([name, "ok"], stats.ok)
            calls.add_metric([name, "failed"], stats.failed)
            durations.add_metric([name], stats.cumulative(), stats.total_seconds)
        yield calls
        yield durations
        yield GaugeMetricFamily(
            "icn_rmi_calls_in_progress", "Calls running now", value=len(self.server.jobs.running)
        )
        events = CounterMetricFamily(
            "icn_rmi_events", "Every counter the RMI server keeps, by its name", labels=["event"]
        )
        for key, value in sorted(self.server.counters.items()):
            events.add_metric([key], value)
        yield events


def register_rmi_metrics(server: RmiServer, registry: CollectorRegistry) -> None:
    registry.register(RmiCollector(server))
