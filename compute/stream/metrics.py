"""Prometheus metrics of a running flow's operators, read when a scrape asks.

Nothing here runs per record: :class:`StreamCollector` reads the integer counters and the
watermark each :class:`~compute.stream.instance.Instance` already keeps, in the loop thread
(:mod:`icn.observe.endpoint` answers scrapes there, between two steps), once per scrape.

Names follow Prometheus' conventions: prefix ``icn_``, base units (the watermark in seconds of
event time), counters end in ``_total``.  Labels are the operator's name and partition, both
fixed by the graph file; a record's key never becomes a label.  Every counter an instance keeps
is also exported as ``icn_stream_events_total{event=...}``, so one added later is seen without a
change here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from compute.stream.batch import END_OF_TIME, NO_WATERMARK

if TYPE_CHECKING:
    from compute.stream.flow import FlowRun
    from compute.stream.instance import Instance

LABELS = ["operator", "partition"]

# family -> (help, instance counter); sinks count what they wrote as records_out, the others
# what they emitted as records (see _records_out)
_COUNTERS = {
    "records_in": ("Records an operator instance read (a source: from its input)", "records_in"),
    "batches_in": ("Batches an operator instance read from its input streams", "batches_in"),
    "batches_out": ("Batches an operator instance published on its stream", "batches"),
    "steps": ("Steps an operator instance made (one per input batch set)", "steps"),
    "checkpoints": ("Checkpoints an operator instance saved", "checkpoints"),
    "function_errors": ("Records an operator's function raised on", "fn_errors"),
}


def _records_out(inst: Instance) -> int:
    return inst.counters["records_out" if inst.sink is not None else "records"]


def _watermark_seconds(watermark: int) -> float | None:
    """Event time in seconds (graphs keep it in ms); None before event time has started."""
    if watermark == NO_WATERMARK:
        return None
    if watermark >= END_OF_TIME:
        return math.inf  # the stream ended: every event time is behind
    return watermark / 1000


class StreamCollector(Collector):
    """Reads the instances of one :class:`~compute.stream.flow.FlowRun` at scrape time."""

    def __init__(self, run: FlowRun) -> None:
        self.run = run

    def describe(self) -> list[Metric]:
        return []  # the instances exist once the run started: collect() at every scrape

    def collect(self) -> Iterator[Metric]:
        instances = list(self.run.instances)
        flow = self.run.graph.flow
        info = GaugeMetricFamily(
            "icn_stream_operator_info",
            "An operator instance this process runs (value 1), with its flow and kind",
            labels=[*LABELS, "flow", "kind"],
        )
        families = {
            name: CounterMetricFamily(f"icn_stream_{name}", help_, labels=LABELS)
            for name, (help_, _) in _COUNTERS.items()
        }
        records_out = CounterMetricFamily(
            "icn_stream_records_out", "Records an operator instance emitted or wrote", labels=LABELS
        )
        late = CounterMetricFamily(
            "icn_stream_late_records",
            "Records behind the watermark: dropped (their window closed) or fired (an update)",
            labels=[*LABELS, "outcome"],
        )
        watermark = GaugeMetricFamily(
            "icn_stream_watermark_seconds",
            "An operator instance's watermark: event time in seconds (+Inf once ended)",
            labels=LABELS,
        )
        done = GaugeMetricFamily(
            "icn_stream_instance_done", "1 once an operator instance has ended", labels=LABELS
        )
        events = CounterMetricFamily(
            "icn_stream_events",
            "Every counter an operator instance keeps, by name",
            labels=[*LABELS, "event"],
        )
        for inst in instances:
            labels = [inst.name, str(inst.partition)]
            info.add_metric([*labels, flow, type(inst.op).__name__], 1)
            for name, (_, key) in _COUNTERS.items():
                families[name].add_metric(labels, inst.counters[key])
            records_out.add_metric(labels, _records_out(inst))
            late.add_metric([*labels, "dropped"], inst.counters["late_dropped"])
            late.add_metric([*labels, "fired"], inst.counters["late_fired"])
            seconds = _watermark_seconds(inst.watermark)
            if seconds is not None:  # no sample rather than a made-up time before the first
                watermark.add_metric(labels, seconds)
            done.add_metric(labels, 1 if inst.done.is_set() else 0)
            for key, n in sorted(inst.counters.items()):
                events.add_metric([*labels, key], n)
        yield info
        yield from families.values()
        yield from (records_out, late, watermark, done, events)


def register_stream_metrics(run: FlowRun, registry: CollectorRegistry) -> StreamCollector:
    """Export ``run``'s operator metrics from ``registry`` (served by
    :func:`icn.observe.endpoint.serve_metrics`)."""
    collector = StreamCollector(run)
    registry.register(collector)
    return collector
