"""The scenario file format (pydantic).  ``loader`` reads a file into it and explains errors.

Every model forbids unknown fields, so a typo is reported instead of ignored.  Quantities take
units (``10ms``, ``5%``, ``10Mbit``; see :mod:`apps.scenario.units`).  Checks that span sections
(a link to a node that does not exist...) live in :func:`reference_errors`, which reports the
path of the offending field so the loader can name its line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from apps.scenario.packing import refusal
from icn.errors import ConfigError
from icn.units import parse_duration, parse_probability, parse_rate
from icn.wire.name import from_uri

Duration = Annotated[float, BeforeValidator(parse_duration)]
Probability = Annotated[float, BeforeValidator(parse_probability)]
Rate = Annotated[float, BeforeValidator(parse_rate)]

NODE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# forwarder settings the launcher owns: a node's listen addresses, faces and routes follow from
# the scenario's links and routes
LAUNCHER_OWNED = ("listen", "faces", "routes")

Loc = tuple[str | int, ...]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_prefix(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not a name prefix; write it like /app/data")
    try:
        from_uri(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return value


Prefix = Annotated[str, BeforeValidator(lambda v: _check_prefix(v) if isinstance(v, str) else v)]


def _check_identifier(value: str) -> str:
    if not NODE_NAME.match(value):
        raise ValueError(f"{value!r}: use a letter then letters, digits, - or _ (32 at most)")
    return value


# names of scenarios, nodes, services and workloads (they end up in file and namespace names)
Identifier = Annotated[str, AfterValidator(_check_identifier)]


class NodeSpec(_Strict):
    """One forwarder.  ``forwarder`` takes any field of the forwarder's config file except
    listen, faces and routes, which the launcher derives from links and routes."""

    cs_capacity: int | None = Field(None, ge=0, description="content store entries")
    strategy: str | None = Field(None, description="default strategy, e.g. best-route")
    forwarder: dict[str, Any] = Field(default_factory=dict)

    @field_validator("forwarder")
    @classmethod
    def _check_forwarder(cls, v: dict[str, Any]) -> dict[str, Any]:
        from forwarder.config import ForwarderConfigError, config_from_dict
        from icn.problems import NestedProblems

        owned = [k for k in LAUNCHER_OWNED if k in v]
        if owned:
            raise ValueError(
                f"{', '.join(owned)}: set by the launcher from 'links' and 'routes'; remove it"
            )
        try:
            config_from_dict(v, "forwarder")
        except ForwarderConfigError as exc:
            raise NestedProblems(exc.problems) from None  # each at its own line
        return v


class LinkSpec(_Strict):
    """A link between two nodes, shaped the same way in both directions."""

    between: tuple[str, str] = Field(description="the two nodes, e.g. [a, b]")
    transport: Literal["udp", "tcp"] = "udp"
    delay: Duration = 0.0
    jitter: Duration = 0.0
    loss: Probability = 0.0
    rate: Rate | None = None
    cost: int = Field(1, ge=0, description="routing weight for routes: auto")
    seed: int | None = Field(None, description="seed of the loss and jitter draws")

    @field_validator("between")
    @classmethod
    def _two_nodes(cls, v: tuple[str, str]) -> tuple[str, str]:
        if v[0] == v[1]:
            raise ValueError(f"a link needs two different nodes, got [{v[0]}, {v[1]}]")
        return v

    @property
    def name(self) -> str:
        return f"{self.between[0]}-{self.between[1]}"


class RouteSpec(_Strict):
    """An explicit route: on ``node``, names under ``prefix`` go toward neighbor ``via``."""

    node: str
    prefix: Prefix
    via: str
    cost: int = Field(0, ge=0)


class ProcessSpec(_Strict):
    name: Identifier
    node: str
    entry: str = Field(description="a Python callable as module:function")
    args: dict[str, Any] = Field(default_factory=dict)
    announce: list[Prefix] = Field(
        default_factory=list, description="prefixes served here; routes: auto routes them"
    )

    @field_validator("entry")
    @classmethod
    def _check_entry(cls, v: str) -> str:
        if not ENTRY.match(v):
            raise ValueError(f"{v!r} is not module:function, e.g. apps.workloads:producer")
        return v


class ServiceSpec(ProcessSpec):
    """A long-running process attached to a node (a producer, a function server, an
    aggregator...).  With ``colocate``, not a process: the node's forwarder process runs it, on
    an in-memory face (faster; a kill of the node takes it along)."""

    ready_timeout: Duration = 15.0
    colocate: bool = Field(
        False, description="run inside the node's forwarder process, on an in-memory face"
    )


ReportItem = Literal["latency", "throughput", "success"]


def _every_report_item() -> list[ReportItem]:
    return ["latency", "throughput", "success"]


class WorkloadSpec(ProcessSpec):
    """A process started at ``start`` for ``duration`` (default: to the end of the run)."""

    start: Duration = 0.0
    duration: Duration | None = None
    report: list[ReportItem] = Field(default_factory=_every_report_item)


FaultAction = Literal["kill", "restart", "cut", "restore", "shape", "signal"]
FAULT_ACTIONS: tuple[FaultAction, ...] = ("kill", "restart", "cut", "restore", "shape", "signal")
TargetKind = Literal["node", "service", "workload"]
LinkRef = Annotated[
    tuple[str, str], BeforeValidator(lambda v: tuple(v.split("-", 1)) if isinstance(v, str) else v)
]


class FaultSpec(_Strict):
    """At ``at`` seconds: kill or restart a node, a service or a workload, cut or restore a
    link, change its shaping, or signal a service or workload (SIGUSR1: what it does is the
    entry's, e.g. a replica of ``apps.rmi_entries:server`` slows down ``slow_factor`` times).

    Written with the action as the key: ``{at: 5s, kill: b}``, ``{at: 5s, kill: agg-b}``,
    ``{at: 8s, cut: [a, b]}``, ``{at: 9s, shape: [a, b], loss: 10%, delay: 20ms}``,
    ``{at: 6s, signal: r1}``.
    """

    at: Duration
    kill: str | None = None
    restart: str | None = None
    cut: LinkRef | None = None
    restore: LinkRef | None = None
    shape: LinkRef | None = None
    signal: str | None = None
    delay: Duration | None = None
    jitter: Duration | None = None
    loss: Probability | None = None
    rate: Rate | None = None

    @model_validator(mode="after")
    def _one_action(self) -> FaultSpec:
        actions = [a for a in FAULT_ACTIONS if getattr(self, a)]
        if len(actions) != 1:
            got = ", ".join(actions) or "none"
            raise ValueError(f"a fault needs exactly one of {', '.join(FAULT_ACTIONS)} (got {got})")
        shaping = [f for f in ("delay", "jitter", "loss", "rate") if getattr(self, f) is not None]
        if actions[0] != "shape" and shaping:
            raise ValueError(f"{', '.join(shaping)}: only a 'shape' fault changes a link")
        if actions[0] == "shape" and not shaping:
            raise ValueError("a 'shape' fault needs at least one of delay, jitter, loss, rate")
        return self

    @property
    def action(self) -> FaultAction:
        for a in FAULT_ACTIONS:
            if getattr(self, a):
                return a
        raise AssertionError("validated")

    @property
    def target(self) -> str | tuple[str, str]:
        value = getattr(self, self.action)
        return value if isinstance(value, str) else (value[0], value[1])

    @property
    def disruptive(self) -> bool:
        return self.action in ("kill", "cut")

    def describe(self, kind: TargetKind | None = None) -> str:
        """``kill b`` (a node), ``kill service agg-b``, ``cut a-b``: ``kind`` is what a kill
        or restart names (:meth:`Scenario.kind_of`)."""
        t = self.target
        what = t if isinstance(t, str) else f"{t[0]}-{t[1]}"
        if kind in ("service", "workload"):
            what = f"{kind} {what}"
        return f"{self.action} {what}"


ChaosKind = Literal["node_kill_restart", "service_kill_restart", "link_cut", "loss"]
CHAOS_KINDS: tuple[ChaosKind, ...] = (
    "node_kill_restart",
    "service_kill_restart",
    "link_cut",
    "loss",
)


def _span(value: Any) -> Any:
    """``5s`` or ``[2s, 8s]``: a fixed time or a range drawn from uniformly."""
    if isinstance(value, str | int | float):
        return (value, value)
    return value


class ChaosSpec(_Strict):
    """Random faults drawn from ``seed``, expanded into ordinary timed faults when the file is
    loaded (the same seed always gives the same faults).  Every ``interval`` (a time drawn
    from the range) one episode starts: a kind drawn from ``kinds``, a target drawn from the
    eligible ``nodes``, ``services`` or ``links``, and its end ``down_for`` (``loss_for``)
    later: ``node_kill_restart`` kills a node and restarts it, ``service_kill_restart`` a
    service, ``link_cut`` cuts a link and restores it, ``loss`` sets a link's loss to ``loss``
    and then back.  Episodes that touch the same node never overlap (nor follow each other
    within 2 s); every episode is over by ``end``."""

    seed: int = Field(description="the same seed gives the same faults")
    start: Duration = Field(0.0, description="no episode starts before this")
    end: Duration | None = Field(None, description="episodes are over by then (default: the end)")
    interval: Annotated[tuple[Duration, Duration], BeforeValidator(_span)] = Field(
        description="time between the starts of two episodes: 20s or [10s, 30s]"
    )
    kinds: list[ChaosKind] = Field(min_length=1)
    nodes: list[str] = Field(default_factory=list, description="nodes node_kill_restart may kill")
    services: list[str] = Field(
        default_factory=list, description="services service_kill_restart may kill"
    )
    links: list[LinkRef] = Field(
        default_factory=list, description="links link_cut may cut and loss may degrade"
    )
    down_for: Annotated[tuple[Duration, Duration], BeforeValidator(_span)] = Field(
        (2.0, 8.0), description="how long a killed node or service stays down, a link stays cut"
    )
    loss: Probability = Field(0.05, description="a link's loss during a loss episode")
    loss_for: Annotated[tuple[Duration, Duration], BeforeValidator(_span)] = Field(
        (10.0, 30.0), description="how long a loss episode lasts"
    )

    @field_validator("interval", "down_for", "loss_for")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if lo <= 0:
            raise ValueError(f"must be above 0, e.g. [{max(hi, 1):g}s, {max(hi, 1) * 2:g}s]")
        if lo > hi:
            raise ValueError(f"[{lo:g}s, {hi:g}s]: the first bound is above the second; swap them")
        return v

    @field_validator("kinds")
    @classmethod
    def _unique(cls, v: list[ChaosKind]) -> list[ChaosKind]:
        twice = sorted({k for k in v if v.count(k) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice; list each kind once")
        return v

    @field_validator("loss")
    @classmethod
    def _some_loss(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("a loss episode needs some loss, e.g. loss: 5%")
        return v


WORKLOAD_CRITERIA = (
    "min_success_ratio",
    "max_p99_latency",
    "min_throughput",
    "max_recovery",
    "max_p99_ratio",
)
METRIC_CRITERIA = ("min", "max", "max_share", "min_share")
SHARE_CRITERIA = ("max_share", "min_share")


class Expectation(_Strict):
    """What the run must show; a failed expectation fails the run.  Either about a workload's
    operations (``workload`` with ``min_success_ratio``, ``max_p99_latency``,
    ``min_throughput``, ``max_recovery``, or ``max_p99_ratio``: its p99 latency over that of
    the workload ``baseline``) or about a metric the services and workloads report (``metric``
    with ``min`` and/or ``max``: its total over every process, or the value of one
    ``process``; or ``max_share``/``min_share``: ``process``'s part of the metric's increase
    over every process that reports it, from ``since`` to the end of the run)."""

    workload: str | None = None
    min_success_ratio: Probability | None = None
    max_p99_latency: Duration | None = None
    min_throughput: float | None = Field(None, ge=0, description="successes per second")
    max_recovery: Duration | None = Field(
        None, description="after each kill or cut during the workload, time to the next success"
    )
    max_p99_ratio: Probability | None = Field(
        None, description="the workload's p99 latency over the baseline's, e.g. 33%"
    )
    baseline: str | None = Field(None, description="the workload max_p99_ratio compares with")
    metric: str | None = Field(None, min_length=1, description="a metric reported by ctx.metric")
    process: str | None = Field(None, description="the one service or workload to look at")
    min: float | None = None
    max: float | None = None
    max_share: Probability | None = Field(
        None, description="process's part of the metric's increase since 'since', e.g. 10%"
    )
    min_share: Probability | None = None
    since: Duration = Field(0.0, description="share criteria: from this time to the end")

    @model_validator(mode="after")
    def _some_criterion(self) -> Expectation:
        set_ = [c for c in (*WORKLOAD_CRITERIA, *METRIC_CRITERIA) if getattr(self, c) is not None]
        if self.workload is not None and self.metric is not None:
            raise ValueError(
                "workload, metric: an expectation is about a workload or a metric, not both; "
                "split it in two"
            )
        if self.workload is None and self.metric is None:
            raise ValueError(
                "an expectation needs 'workload' (with min_success_ratio, max_p99_latency, "
                "min_throughput, max_recovery) or 'metric' (with min, max)"
            )
        if self.workload is not None:
            wrong = [c for c in set_ if c in METRIC_CRITERIA] + (
                ["process"] if self.process else []
            )
            if wrong:
                raise ValueError(
                    f"{', '.join(wrong)}: only a metric expectation takes this (metric: NAME)"
                )
            if not set_:
                raise ValueError(
                    f"an expectation needs at least one of {', '.join(WORKLOAD_CRITERIA)}"
                )
            if (self.max_p99_ratio is None) != (self.baseline is None):
                raise ValueError(
                    "max_p99_ratio and baseline go together: the p99 of this workload over "
                    "that of the baseline workload, e.g. {workload: cloned, baseline: plain, "
                    "max_p99_ratio: 33%}"
                )
        else:
            wrong = [c for c in set_ if c in WORKLOAD_CRITERIA]
            if wrong:
                raise ValueError(
                    f"{', '.join(wrong)}: a workload criterion; a metric expectation takes "
                    "min and max"
                )
            if not set_:
                raise ValueError(f"metric {self.metric}: give min, max, max_share or min_share")
            if self.baseline is not None:
                raise ValueError("baseline: only a workload expectation with max_p99_ratio")
            if self.min is not None and self.max is not None and self.min > self.max:
                raise ValueError(f"min {self.min:g} is above max {self.max:g}")
            shares = [c for c in SHARE_CRITERIA if getattr(self, c) is not None]
            if shares and self.process is None:
                raise ValueError(
                    f"{', '.join(shares)}: whose share? name the process, e.g. process: r1"
                )
        if self.since and not any(getattr(self, c) is not None for c in SHARE_CRITERIA):
            raise ValueError("since: only max_share and min_share look at a span of the run")
        return self

    @property
    def subject(self) -> str:
        """``consumer``, ``metric bytes_resent``, ``metric bytes_resent of agg-b``."""
        if self.workload is not None:
            return self.workload
        return f"metric {self.metric}" + (f" of {self.process}" if self.process else "")


class InvariantSpec(_Strict):
    """A check the services and workloads report with ``ctx.check(name, held, outcome)`` that
    the run must show: at least ``min_checks`` checks and none violated.  Without ``process``,
    it holds for every process that reports it (and at least one must).  A violated check
    fails the run even when it is not listed here; listing it makes its absence fail too."""

    check: str = Field(min_length=1, description="the name the entry reports, e.g. exactly_once")
    process: str | None = Field(None, description="the one service or workload to look at")
    min_checks: int = Field(1, ge=1, description="fewer checks than this fails the run")


class TrustSpec(_Strict):
    """A CA made for the run: every service and workload gets an identity (``<ca>/<name>``)
    and a certificate, every process the CA as its trust anchor, and a schema by which a
    service's key may sign Data under the prefixes it announces (apps.scenario.trust)."""

    ca: Prefix | None = Field(None, description="the CA's identity; left out: /<scenario name>")

    @field_validator("ca")
    @classmethod
    def _quotable(cls, v: str | None) -> str | None:
        if v is not None and ('"' in v or "\\" in v):  # (a trust schema quotes each component)
            raise ValueError(f"{v!r}: a CA name cannot hold a double quote or a backslash")
        return v

    validating: bool = Field(
        True,
        alias="validate",
        description="consumers validate every Data they fetch (false: only sign)",
    )


class CaptureSpec(_Strict):
    """Packet captures of the chosen nodes' forwarders: ``<out>/pcap/<node>.pcapng`` each
    (pcapng, an interface per face; read with ``icn pcap`` or Wireshark)."""

    nodes: Literal["all"] | list[str] = Field(
        "all", description="the nodes to capture on: all, or a list of node names"
    )
    max_bytes: int = Field(
        64 * 1024 * 1024, ge=64 * 1024, description="a file passing this size is rotated"
    )
    files: int = Field(2, ge=1, le=1000, description="rotated files kept per node")


class MetricsSpec(_Strict):
    """Prometheus ``/metrics`` on every forwarder, at its node's address and ``port``; the run
    writes ``<out>/prometheus-targets.json`` (file-based service discovery) for Prometheus."""

    port: int = Field(9400, ge=1, le=65535, description="the port on each node's address")


class ReportSpec(_Strict):
    interval: Duration = Field(1.0, description="how often node counters are sampled")
    plots: bool = True
    timelines: list[str] = Field(
        default_factory=list,
        description="metrics shown over time, per process (their increase per second, in "
        "report.json's metrics.timelines and metrics.png), e.g. [calls]",
    )
    expect: list[Expectation] = Field(default_factory=list)
    invariants: list[InvariantSpec] = Field(default_factory=list)

    @field_validator("interval")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v < 0.1:
            raise ValueError("sample at most every 100ms (e.g. interval: 1s)")
        return v


LABEL = re.compile(r"^([A-Za-z0-9][\w./-]*)=([\w.-]*)$")


class PlacementSpec(_Strict):
    """Where the ray backend runs a node: on a Ray node with ``label`` (``key=value``, as given
    to ``ray start --labels``) or with the custom ``resource`` (``ray start --resources``)."""

    label: str | None = None
    resource: str | None = Field(None, min_length=1)

    @field_validator("label")
    @classmethod
    def _check_label(cls, v: str | None) -> str | None:
        if v is not None and not LABEL.match(v):
            raise ValueError(f"{v!r}: write a label as key=value, e.g. zone=edge")
        return v

    @model_validator(mode="after")
    def _one(self) -> PlacementSpec:
        if (self.label is None) == (self.resource is None):
            raise ValueError("give one of label (e.g. label: zone=edge) or resource")
        return self

    @property
    def label_pair(self) -> tuple[str, str] | None:
        if self.label is None:
            return None
        key, _, value = self.label.partition("=")
        return key, value

    def describe(self) -> str:
        return f"the label {self.label}" if self.label else f"the custom resource {self.resource}"


class Scenario(_Strict):
    name: Identifier
    description: str = ""
    backend: Literal["local", "netns", "ray"] = "local"
    duration: Duration = 10.0
    stop_when_done: bool = Field(
        False,
        description="end the run once every workload has finished and every fault has been "
        "applied, instead of at duration (then the upper bound)",
    )
    nodes: dict[Identifier, NodeSpec]
    nodes_per_process: int | None = Field(
        None,
        ge=1,
        description="forwarders one process hosts (local backend; 1: a process per node); "
        "left out: 1 up to 16 nodes, 25 above (apps.scenario.packing)",
    )
    links: list[LinkSpec] = Field(default_factory=list)
    topology: str | None = Field(
        None,
        description="a graph file (.graphml, .gml, .edgelist; relative to the scenario file) "
        "the loader reads nodes and links from, in place of links (see topology_file)",
    )
    routes: Literal["auto"] | list[RouteSpec] = "auto"
    reconverge_after: Duration | None = Field(
        1.0,
        description="routes: auto only; how long the emulated routing protocol takes to route "
        "around a dead node or a cut link (null: never)",
    )
    services: list[ServiceSpec] = Field(default_factory=list)
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)
    chaos: ChaosSpec | None = Field(None, description="random faults from a seed")
    report: ReportSpec = ReportSpec()
    trust: TrustSpec | None = Field(
        None, description="identities, certificates and a trust schema made for the run"
    )
    capture: CaptureSpec | None = Field(None, description="packet captures of chosen nodes")
    metrics: MetricsSpec | None = Field(None, description="Prometheus /metrics on every node")
    placement: dict[str, PlacementSpec] = Field(
        default_factory=dict,
        description="ray backend only: node -> the Ray node label or custom resource it runs "
        "on; the other nodes are spread over the cluster",
    )

    @field_validator("nodes")
    @classmethod
    def _check_nodes(cls, v: dict[str, NodeSpec]) -> dict[str, NodeSpec]:
        if not v:
            raise ValueError("a scenario needs at least one node, e.g. nodes: {a: {}}")
        return v

    @field_validator("duration")
    @classmethod
    def _check_duration(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("a scenario must run for some time, e.g. duration: 10s")
        return v

    def link_between(self, a: str, b: str) -> LinkSpec | None:
        for link in self.links:
            if set(link.between) == {a, b}:
                return link
        return None

    def service(self, name: str) -> ServiceSpec | None:
        return next((s for s in self.services if s.name == name), None)

    def workload(self, name: str) -> WorkloadSpec | None:
        return next((w for w in self.workloads if w.name == name), None)

    def kind_of(self, name: str) -> TargetKind | None:
        """What a fault's ``kill: NAME`` or ``restart: NAME`` names (names are unique)."""
        if name in self.nodes:
            return "node"
        if self.service(name) is not None:
            return "service"
        if self.workload(name) is not None:
            return "workload"
        return None


def reference_errors(sc: Scenario) -> list[tuple[Loc, str]]:
    """Cross-section mistakes, each with the path of the field at fault."""
    errors: list[tuple[Loc, str]] = []
    nodes = set(sc.nodes)
    known = ", ".join(sorted(nodes))
    if sc.nodes_per_process is not None:
        why = refusal(sc.backend, sc.nodes_per_process)
        if why is not None:
            errors.append((("nodes_per_process",), why))

    def need_node(loc: Loc, name: str) -> bool:
        if name in nodes:
            return True
        errors.append((loc, f"no node named {name!r}; the nodes are {known}"))
        return False

    pairs: dict[frozenset[str], int] = {}
    for i, link in enumerate(sc.links):
        ok = all([need_node(("links", i, "between", j), n) for j, n in enumerate(link.between)])
        key = frozenset(link.between)
        if ok and key in pairs:
            errors.append(
                (
                    ("links", i, "between"),
                    f"nodes {link.name} are already linked by links.{pairs[key]}",
                )
            )
        pairs.setdefault(key, i)

    def need_link(loc: Loc, ref: tuple[str, str]) -> None:
        if all([need_node(loc, n) for n in ref]) and frozenset(ref) not in pairs:
            errors.append((loc, f"no link between {ref[0]} and {ref[1]}; add it under links"))

    if isinstance(sc.routes, list):
        for i, route in enumerate(sc.routes):
            ok = need_node(("routes", i, "node"), route.node)
            ok = need_node(("routes", i, "via"), route.via) and ok
            if ok and frozenset((route.node, route.via)) not in pairs:
                errors.append(
                    (("routes", i, "via"), f"{route.via} is not a neighbor of {route.node}")
                )
    if sc.capture is not None and sc.capture.nodes != "all":
        for i, name in enumerate(sc.capture.nodes):
            need_node(("capture", "nodes", i), name)
    if sc.metrics is not None and sc.backend == "ray":
        errors.append(
            (
                ("metrics",),
                "metrics: is for the local and netns backends (on a Ray cluster nodes share "
                "their machine's addresses); remove it or run with --backend local",
            )
        )
    names: dict[str, Loc] = {}
    for section in ("services", "workloads"):
        for i, proc in enumerate(getattr(sc, section)):
            need_node((section, i, "node"), proc.node)
            if proc.name in nodes:
                errors.append(
                    (
                        (section, i, "name"),
                        f"{proc.name!r} is also a node's name, so a fault's kill: {proc.name} "
                        f"would be ambiguous; rename the {section[:-1]}",
                    )
                )
            elif proc.name in names:
                prev = ".".join(str(p) for p in names[proc.name])
                errors.append(((section, i, "name"), f"{proc.name!r} is already used by {prev}"))
            names.setdefault(proc.name, (section, i))
    for i, wl in enumerate(sc.workloads):
        if wl.start >= sc.duration:
            errors.append(
                (
                    ("workloads", i, "start"),
                    f"starts at or after the end of the run ({sc.duration:g}s)",
                )
            )
    for i, fault in enumerate(sc.faults):
        if fault.at >= sc.duration:
            errors.append(
                (("faults", i, "at"), f"at or after the end of the run ({sc.duration:g}s)")
            )
        target = fault.target
        if isinstance(target, str):
            errors += _fault_target_errors(sc, ("faults", i, fault.action), fault.action, target)
        else:
            need_link(("faults", i, fault.action), target)
    if sc.chaos is not None:
        errors += _chaos_errors(sc, sc.chaos, need_node, need_link)
    for name in sc.placement:
        need_node(("placement", name), name)
    workloads = {w.name for w in sc.workloads}
    procs = workloads | {s.name for s in sc.services}
    for i, inv in enumerate(sc.report.invariants):
        if inv.process is not None and inv.process not in procs:
            errors.append(
                (
                    ("report", "invariants", i, "process"),
                    f"no service or workload named {inv.process!r}; they are {_listing(procs)}",
                )
            )
    for i, exp in enumerate(sc.report.expect):
        if exp.workload is not None and exp.workload not in workloads:
            errors.append(
                (
                    ("report", "expect", i, "workload"),
                    f"no workload named {exp.workload!r}; the workloads are {_listing(workloads)}",
                )
            )
        if exp.baseline is not None and exp.baseline not in workloads:
            errors.append(
                (
                    ("report", "expect", i, "baseline"),
                    f"no workload named {exp.baseline!r}; the workloads are {_listing(workloads)}",
                )
            )
        if exp.process is not None and exp.process not in procs:
            errors.append(
                (
                    ("report", "expect", i, "process"),
                    f"no service or workload named {exp.process!r}; they are {_listing(procs)}",
                )
            )
    return errors


# which list of the chaos block each kind draws its targets from
CHAOS_TARGETS: dict[str, tuple[ChaosKind, ...]] = {
    "nodes": ("node_kill_restart",),
    "services": ("service_kill_restart",),
    "links": ("link_cut", "loss"),
}


def _chaos_errors(
    sc: Scenario,
    chaos: ChaosSpec,
    need_node: Callable[[Loc, str], bool],
    need_link: Callable[[Loc, tuple[str, str]], None],
) -> list[tuple[Loc, str]]:
    """Eligible targets that exist and can be killed alone, kinds with something to draw
    from, and a time span inside the run."""
    errors: list[tuple[Loc, str]] = []
    end = sc.duration if chaos.end is None else chaos.end
    if end > sc.duration:
        errors.append(
            (("chaos", "end"), f"{end:g}s is after the end of the run ({sc.duration:g}s)")
        )
    if chaos.start >= end:
        errors.append(
            (
                ("chaos", "start"),
                f"{chaos.start:g}s leaves no time for an episode before the end ({end:g}s); "
                "start earlier or end later",
            )
        )
    for field, kinds in CHAOS_TARGETS.items():
        listed = getattr(chaos, field)
        wanted = [k for k in kinds if k in chaos.kinds]
        if wanted and not listed:
            errors.append(
                (
                    ("chaos", field),
                    f"{' and '.join(wanted)} is in kinds but no {field[:-1]} is eligible; "
                    f"list the {field} it may use, e.g. {field}: [...]",
                )
            )
        if listed and not wanted:
            errors.append(
                (
                    ("chaos", field),
                    f"listed, but no kind uses them; add {' or '.join(kinds)} to kinds or "
                    f"remove {field}",
                )
            )
    for j, node in enumerate(chaos.nodes):
        loc: Loc = ("chaos", "nodes", j)
        if not need_node(loc, node):
            continue
        on_it = [w.name for w in sc.workloads if w.node == node]
        if on_it:
            errors.append(
                (
                    loc,
                    f"node {node} runs workloads ({', '.join(on_it)}), which a node kill stops "
                    f"for good; move them to another node or take {node} off chaos.nodes",
                )
            )
    for j, name in enumerate(chaos.services):
        loc = ("chaos", "services", j)
        svc = sc.service(name)
        if svc is None:
            errors.append(
                (
                    loc,
                    f"no service named {name!r}; the services are "
                    f"{_listing([s.name for s in sc.services])}",
                )
            )
        elif svc.colocate:
            errors.append(
                (
                    loc,
                    f"{name} is co-located with node {svc.node} and cannot be killed alone; "
                    f"list node {svc.node} under chaos.nodes instead, or set colocate: false",
                )
            )
    for j, ref in enumerate(chaos.links):
        need_link(("chaos", "links", j), ref)
    for field in ("nodes", "services", "links"):
        seen: set[Any] = set()
        for j, item in enumerate(getattr(chaos, field)):
            key = frozenset(item) if isinstance(item, tuple) else item
            if key in seen:
                errors.append((("chaos", field, j), f"{_ref_text(item)} is listed twice"))
            seen.add(key)
    return errors


def _ref_text(item: str | tuple[str, str]) -> str:
    return item if isinstance(item, str) else f"{item[0]}-{item[1]}"


def _listing(names: set[str] | list[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def _fault_target_errors(sc: Scenario, loc: Loc, action: str, target: str) -> list[tuple[Loc, str]]:
    """A kill or restart names a node, a service or a workload; not a co-located service
    (it lives and dies with its node's forwarder)."""
    kind = sc.kind_of(target)
    if kind is None:
        return [
            (
                loc,
                f"no node, service or workload named {target!r}; the nodes are "
                f"{_listing(list(sc.nodes))}, the services are "
                f"{_listing([s.name for s in sc.services])}, the workloads are "
                f"{_listing([w.name for w in sc.workloads])}",
            )
        ]
    if action == "signal" and kind == "node":
        return [(loc, f"{target} is a node; signal names a service or a workload (a process)")]
    svc = sc.service(target)
    if svc is not None and svc.colocate:
        if action == "signal":
            return [
                (
                    loc,
                    f"{target} is co-located with node {svc.node}, in its forwarder's process: "
                    "set colocate: false to signal it",
                )
            ]
        return [
            (
                loc,
                f"{target} is co-located with node {svc.node}: {action} the node, or set "
                "colocate: false",
            )
        ]
    return []
