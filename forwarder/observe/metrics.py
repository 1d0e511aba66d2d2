"""The forwarder's Prometheus metrics, read from the counters it keeps when a scrape asks.

Nothing here runs per packet: :class:`ForwarderCollector` walks the faces, tables and counters
the daemon already has, in the loop thread (:mod:`icn.observe.endpoint`), once per scrape.

Names follow Prometheus' conventions: prefix ``icn_``, base units, counters end in ``_total``,
faces are a label (their id; the URIs are on ``icn_face_info``), never a packet's name.  Every
counter the forwarder keeps is also exported as ``icn_forwarder_events_total{event=...}``, so a
counter added later is seen without a change here; the curated families below are the ones
dashboards use.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from icn.observe.endpoint import MetricsEndpoint, serve_metrics

if TYPE_CHECKING:
    from forwarder.daemon import ForwarderDaemon

NAMESPACE = "icn"

# forwarder-wide packet counters: family -> (direction -> counter key)
_PACKETS = {
    "interests": {"in": "fw.in_interest", "out": "fw.out_interest"},
    "data": {"in": "fw.in_data", "out": "fw.out_data"},
    "nacks": {"in": "fw.in_nack", "out": "fw.out_nack"},
}
# a face's FaceStats field per (family, direction)
_FACE_PACKETS = {
    "interests": ("n_in_interests", "n_out_interests"),
    "data": ("n_in_data", "n_out_data"),
    "nacks": ("n_in_nacks", "n_out_nacks"),
}


def is_drop(key: str) -> bool:
    """Counters that count a packet dropped (malformed, looping, out of scope, no room...)."""
    section, _, what = key.partition(".")
    if what.startswith("drop_"):
        return True
    if section == "face":
        return what not in ("created", "destroyed", "congestion_marked", "idle_closed")
    return section == "shaper" or what in ("loop_dnl", "loop_pit", "retx_suppressed")


def drop_reason(key: str) -> str:
    section, _, what = key.partition(".")
    return f"{section}_{what.removeprefix('drop_')}"


class ForwarderCollector(Collector):
    """Reads one daemon's faces, tables and counters at scrape time."""

    def __init__(self, daemon: ForwarderDaemon) -> None:
        self.daemon = daemon

    def describe(self) -> list[Metric]:
        return []  # families depend on the faces present: collect() at every scrape

    def collect(self) -> Iterator[Metric]:
        d = self.daemon
        counters = d.counters
        yield from self._faces()
        for family, keys in _PACKETS.items():
            m = CounterMetricFamily(
                f"{NAMESPACE}_{family}",
                f"{family.capitalize()} the forwarding pipelines received and sent",
                labels=["direction"],
            )
            for direction, key in keys.items():
                m.add_metric([direction], counters.get(key, 0))
            yield m
        yield _counter(
            "interests_satisfied", "Interests satisfied", counters["fw.interest_satisfied"]
        )
        yield _counter(
            "interests_unsatisfied",
            "Interests that expired or were rejected unsatisfied",
            counters["fw.interest_unsatisfied"],
        )
        yield _counter(
            "cs_hits", "Interests answered from the content store", counters["fw.cs_hit"]
        )
        yield _counter("cs_misses", "Content store lookups that found nothing", counters["cs.miss"])
        fw = d.fw
        for name, help_, value in (
            ("pit_entries", "Pending Interest Table entries", len(fw.pit)),
            ("fib_entries", "FIB entries", len(fw.fib)),
            ("rib_routes", "RIB routes", len(d.rib)),
            ("cs_entries", "Content store entries", len(fw.cs)),
            ("cs_bytes", "Bytes of Data held in the content store", fw.cs.bytes_used),
            ("dnl_entries", "Dead Nonce List entries", len(fw.dnl)),
            ("reflexive_entries", "Reflexive forwarding table entries", len(fw.rft)),
            ("faces", "Faces up", len(d.faces)),
            ("uptime_seconds", "Seconds since the daemon started", time.time() - d.started_at),
        ):
            yield GaugeMetricFamily(f"{NAMESPACE}_{name}", help_, value=value)
        drops = CounterMetricFamily(
            f"{NAMESPACE}_drops", "Packets dropped, by reason", labels=["reason"]
        )
        refusals = CounterMetricFamily(
            f"{NAMESPACE}_refusals",
            "Requests refused for want of room or trust, by reason",
            labels=["reason"],
        )
        events = CounterMetricFamily(
            f"{NAMESPACE}_forwarder_events",
            "Every counter the forwarder keeps, by its name",
            labels=["event"],
        )
        for key, value in sorted(counters.items()):
            events.add_metric([key], value)
            if "refused" in key:
                refusals.add_metric([key.replace(".", "_")], value)
            elif is_drop(key):
                drops.add_metric([drop_reason(key)], value)
        yield drops
        yield refusals
        yield events

    def _faces(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            f"{NAMESPACE}_face_info",
            "One per face: its URIs and scope",
            labels=["face", "remote_uri", "local_uri", "scope"],
        )
        packets = {
            family: CounterMetricFamily(
                f"{NAMESPACE}_face_{family}",
                f"{family.capitalize()} a face received (in) and sent (out)",
                labels=["face", "direction"],
            )
            for family in _FACE_PACKETS
        }
        octets = CounterMetricFamily(
            f"{NAMESPACE}_face_bytes",
            "Bytes of link packets a face received (in) and sent (out)",
            labels=["face", "direction"],
        )
        marked = CounterMetricFamily(
            f"{NAMESPACE}_face_congestion_marks",
            "Packets a face marked with a CongestionMark",
            labels=["face"],
        )
        shaped = CounterMetricFamily(
            f"{NAMESPACE}_face_shaper_drops",
            "Packets a face's shaper dropped (loss, queue full)",
            labels=["face"],
        )
        refused = CounterMetricFamily(
            f"{NAMESPACE}_face_refused_interests",
            "Interests from a face refused for want of table room (the top ten faces)",
            labels=["face"],
        )
        satisfied = CounterMetricFamily(
            f"{NAMESPACE}_face_interests_satisfied",
            "Interests from a face answered with Data (forwarded to it or from the content store)",
            labels=["face"],
        )
        timed_out = CounterMetricFamily(
            f"{NAMESPACE}_face_interests_timed_out",
            "Interests from a face whose PIT entry expired unanswered",
            labels=["face"],
        )
        for face in self.daemon.faces:
            fid = str(face.face_id)
            stats = face.stats
            info.add_metric(
                [fid, face.remote_uri, face.local_uri, "local" if face.is_local else "nonlocal"],
                1,
            )
            for family, (n_in, n_out) in _FACE_PACKETS.items():
                packets[family].add_metric([fid, "in"], getattr(stats, n_in))
                packets[family].add_metric([fid, "out"], getattr(stats, n_out))
            octets.add_metric([fid, "in"], face.transport.in_bytes)
            octets.add_metric([fid, "out"], face.transport.out_bytes)
            marked.add_metric([fid], stats.n_congestion_marked)
            shaped.add_metric([fid], face.shaper_dropped)
            satisfied.add_metric([fid], stats.n_satisfied_interests)
            timed_out.add_metric([fid], stats.n_timed_out_interests)
        for face_id, n in self.daemon.fw.refused_by_face.most_common(10):
            refused.add_metric([str(face_id)], n)
        yield info
        yield from packets.values()
        yield from (octets, marked, shaped, refused, satisfied, timed_out)


def _counter(name: str, help_: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{NAMESPACE}_{name}", help_, value=value)


def forwarder_registry(daemon: ForwarderDaemon) -> CollectorRegistry:
    """A registry with the daemon's metrics and its process' CPU and memory."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ForwarderCollector(daemon))
    ProcessCollector(namespace=NAMESPACE, registry=registry)
    return registry


async def serve_forwarder_metrics(daemon: ForwarderDaemon, listen: str) -> MetricsEndpoint:
    return await serve_metrics(listen, forwarder_registry(daemon))
