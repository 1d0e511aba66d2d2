"""Graph files: the operators of a flow, their inputs, partitions and placement.

A graph is YAML (or the same mapping inline in a scenario), validated with pydantic before
anything starts; a bad file gets every problem at once, each naming the operator, the field
and the fix.  :class:`Graph` then answers the questions the runtime asks: how many partitions
an operator has, which input streams an instance reads (in a fixed order, so that a replay
after a restart sees the same batches in the same order), and who consumes a stream.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from compute.stream.errors import GraphError
from icn.units import parse_duration

Duration = Annotated[float, BeforeValidator(parse_duration)]
NAME = re.compile(r"^[A-Za-z0-9_-]+$")
CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
MAX_PARTITIONS = 256


def _callable(value: object) -> object:
    if isinstance(value, str) and not CALLABLE.match(value):
        raise ValueError(f"{value!r} is not module:function, e.g. apps.stream_demo:to_celsius")
    return value


Callable = Annotated[str, BeforeValidator(_callable)]


def _name(value: object) -> object:
    if isinstance(value, str) and not NAME.match(value):
        raise ValueError(f"{value!r}: use letters, digits, '-' and '_' only (it becomes a name)")
    return value


OpName = Annotated[str, BeforeValidator(_name)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Op(_Strict):
    name: OpName
    node: str | None = Field(None, description="the scenario node that runs this operator")
    partitions: int | None = Field(None, ge=1, le=MAX_PARTITIONS)

    def inputs(self) -> list[str]:
        return []


class _Source(_Op):
    batch: int = Field(256, ge=1, le=1_000_000, description="records per batch at most")
    max_delay: Duration = Field(0.0, description="watermark = newest event time - max_delay")
    time_field: str | None = Field(None, description="event time (ms) in each record")
    key_field: str | None = Field(None, description="the record's key")


class GeneratorSource(_Source):
    """Deterministic synthetic records: ``{"sensor": "s<i % keys>", "value": ...}``, or what
    ``fn(i)`` returns; event time ``start + i * 1000 / events_per_second`` ms."""

    type: Literal["generator"]
    count: int | None = Field(None, ge=0, description="records in all (none: endless)")
    rate: float | None = Field(None, gt=0, description="records/s over all partitions")
    keys: int = Field(10, ge=1)
    events_per_second: float = Field(1000.0, gt=0)
    start: int = 0
    fn: Callable | None = None


class FileSource(_Source):
    type: Literal["file_source"]
    path: str
    format: Literal["jsonl", "csv"] = "jsonl"
    rate: float | None = Field(None, gt=0, description="records/s (none: as fast as pulled)")


class MqttSource(_Source):
    type: Literal["mqtt_source"]
    broker: str = Field(description="host:port or mqtt://host:port")
    topic: str
    qos: Literal[0, 1] = 1
    format: Literal["json", "raw"] = "json"
    linger: Duration | None = Field(
        None, description="how long a batch waits to fill (none: the graph's settings.linger)"
    )
    client_id: str | None = None
    idle_watermark: Duration | None = Field(
        None, description="with no message for this long, event time follows the clock"
    )


class _OneInput(_Op):
    input: OpName

    def inputs(self) -> list[str]:
        return [self.input]


class MapOp(_OneInput):
    type: Literal["map"]
    fn: Callable
    vectorized: bool = Field(False, description="fn takes and returns a batch's columns")


class FilterOp(_OneInput):
    type: Literal["filter"]
    fn: Callable
    vectorized: bool = Field(False, description="fn takes and returns a batch's columns")


class FlatMapOp(_OneInput):
    type: Literal["flat_map"]
    fn: Callable
    vectorized: bool = Field(False, description="fn takes and returns a batch's columns")


class KeyByOp(_OneInput):
    type: Literal["key_by"]
    field: str | None = None
    fn: Callable | None = None

    @model_validator(mode="after")
    def _one(self) -> KeyByOp:
        if (self.field is None) == (self.fn is None):
            raise ValueError("key_by needs exactly one of field (a record field) or fn")
        return self


class Sliding(_Strict):
    size: Duration
    slide: Duration


class _Windowed(_Op):
    tumbling: Duration | None = None
    sliding: Sliding | None = None
    allowed_lateness: Duration = 0.0

    @model_validator(mode="after")
    def _one_window(self) -> _Windowed:
        if (self.tumbling is None) == (self.sliding is None):
            raise ValueError("give exactly one of tumbling: 1s or sliding: {size: 10s, slide: 1s}")
        size = self.tumbling if self.tumbling is not None else self.sliding.size  # type: ignore[union-attr]
        if size < 0.001:
            raise ValueError("a window lasts at least 1ms")
        if self.sliding is not None and not 0.001 <= self.sliding.slide <= self.sliding.size:
            raise ValueError("sliding.slide must be at least 1ms and at most sliding.size")
        return self

    def size_slide_ms(self) -> tuple[int, int]:
        if self.tumbling is not None:
            size = round(self.tumbling * 1000)
            return size, size
        assert self.sliding is not None
        return round(self.sliding.size * 1000), round(self.sliding.slide * 1000)


AggregateKind = Literal["count", "sum", "mean", "min", "max", "reduce"]


class WindowOp(_Windowed, _OneInput):
    type: Literal["window"]
    aggregate: AggregateKind
    field: str | None = Field(None, description="aggregate this field of each record")
    reduce: Callable | None = None

    @model_validator(mode="after")
    def _reduce(self) -> WindowOp:
        if (self.aggregate == "reduce") != (self.reduce is not None):
            raise ValueError("aggregate: reduce needs reduce: module:function (and only it does)")
        return self


class JoinOp(_Windowed):
    type: Literal["join"]
    left: OpName
    right: OpName

    def inputs(self) -> list[str]:
        return [self.left, self.right]


class StdoutSink(_OneInput):
    type: Literal["stdout"]


class FileSink(_OneInput):
    type: Literal["file_sink"]
    path: str = Field(description="JSON lines; {partition} in the path with several partitions")


class MqttSink(_OneInput):
    type: Literal["mqtt_sink"]
    broker: str
    topic: str = Field(description="may contain {key}")
    qos: Literal[0, 1] = 1
    client_id: str | None = None


OpSpec = Annotated[
    GeneratorSource
    | FileSource
    | MqttSource
    | MapOp
    | FilterOp
    | FlatMapOp
    | KeyByOp
    | WindowOp
    | JoinOp
    | StdoutSink
    | FileSink
    | MqttSink,
    Field(discriminator="type"),
]
SOURCES = (GeneratorSource, FileSource, MqttSource)
SINKS = (StdoutSink, FileSink, MqttSink)
OP_TYPES = (
    "generator, file_source, mqtt_source, map, filter, flat_map, key_by, window, join, "
    "stdout, file_sink, mqtt_sink"
)


class Settings(_Strict):
    batch_bytes: int = Field(8000, ge=512, le=4 * 1024 * 1024 - 8192)
    window: int = Field(32, ge=1, le=4096, description="Interests in flight per input, at most")
    buffer: int = Field(64, ge=2, le=1_000_000, description="batches ahead of the slowest reader")
    lead: Duration = Field(
        0.05, gt=0, description="seconds an output runs ahead of its slowest reader, at most"
    )
    linger: Duration = Field(
        0.005, ge=0, description="seconds a source waits to fill a batch before sending it"
    )
    lifetime: Duration = Field(2.0, description="Interest lifetime")
    checkpoint: Duration | None = Field(None, description="seconds between checkpoints")
    state_dir: str | None = Field(None, description="where checkpoints go (default: ./state)")


class GraphSpec(_Strict):
    flow: str = Field(description="the flow's name prefix, e.g. /sensors")
    settings: Settings = Field(default_factory=Settings)
    operators: list[OpSpec] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _known_types(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for i, op in enumerate(data.get("operators") or []):
                if isinstance(op, Mapping) and op.get("type") not in OP_TYPES.split(", "):
                    raise ValueError(
                        f"operators.{i} ({op.get('name', '?')}): type {op.get('type')!r} is "
                        f"not one of {OP_TYPES}"
                    )
        return data


StreamId = tuple[str, int]  # (operator, partition)


class Graph:
    """A validated graph and the wiring derived from it."""

    def __init__(self, spec: GraphSpec, source: str = "<graph>") -> None:
        self.spec = spec
        self.source = source
        self.flow = "/" + spec.flow.strip("/")
        self.settings = spec.settings
        self.ops: dict[str, Any] = {}
        problems: list[str] = []
        for op in spec.operators:
            if op.name in self.ops:
                problems.append(f"operator {op.name!r} is defined twice: rename one")
            self.ops[op.name] = op
        if not problems:
            problems += self._check_inputs()
        if not problems:
            self.order = self._topological()
            self.partitions: dict[str, int] = {}
            self.keyed: dict[str, bool] = {}
            for name in self.order:
                problems += self._derive(self.ops[name])
        if problems:
            raise GraphError(source, problems)
        self._consumers: dict[StreamId, list[str]] = {}
        for name in self.order:
            for p in range(self.partitions[name]):
                for stream in self.inputs_of(name, p):
                    self._consumers.setdefault(stream, []).append(instance_id(name, p))

    # ---- wiring -------------------------------------------------------------------------------

    def inputs_of(self, name: str, p: int) -> list[StreamId]:
        """The streams instance ``p`` of ``name`` reads, in the order it reads them each round."""
        op = self.ops[name]
        streams: list[StreamId] = []
        for up in op.inputs():
            n_up = self.partitions[up]
            if isinstance(op, KeyByOp):
                streams += [(up, q) for q in range(n_up)]
            else:
                n = self.partitions[name]
                streams += [(up, q) for q in range(n_up) if q % n == p]
        return streams

    def watermark_step(self, name: str) -> int | None:
        """The event time (ms) between the watermarks that matter downstream of ``name``:
        every window end, and every end + allowed lateness (when a window's state goes), of
        the windows and joins after it is a multiple of it.  An output with no records need
        not be sent unless its watermark enters a later step: no window downstream can tell
        (it fires, and finds a record late, at the same records as if every watermark came).
        None: nothing downstream looks at watermarks, so such an output is never needed."""
        step = 0
        seen: set[str] = set()
        todo = [name]
        while todo:
            current = todo.pop()
            for op in self.ops.values():
                if current in op.inputs() and op.name not in seen:
                    seen.add(op.name)
                    todo.append(op.name)
                    if isinstance(op, WindowOp | JoinOp):
                        size, slide = op.size_slide_ms()
                        lateness = round(op.allowed_lateness * 1000)
                        step = math.gcd(step, size, slide, lateness)
        return step or None

    def consumers_of(self, stream: StreamId) -> list[str]:
        """Instance ids (``op.partition``) that read ``stream``; sinks have none."""
        return self._consumers.get(stream, [])

    def instances(self, node: str | None = None) -> list[StreamId]:
        """Every (operator, partition), sources first; only those placed on ``node`` if given."""
        return [
            (name, p)
            for name in self.order
            if node is None or self.ops[name].node == node
            for p in range(self.partitions[name])
        ]

    # ---- validation ---------------------------------------------------------------------------

    def _check_inputs(self) -> list[str]:
        problems = []
        consumed: set[str] = set()
        for op in self.ops.values():
            for up in op.inputs():
                consumed.add(up)
                if up not in self.ops:
                    known = ", ".join(self.ops)
                    problems.append(f"{op.name}: input {up!r} is not an operator ({known})")
                elif isinstance(self.ops[up], SINKS):
                    problems.append(f"{op.name}: input {up!r} is a sink, which has no output")
        for op in self.ops.values():
            if not isinstance(op, SINKS) and op.name not in consumed:
                problems.append(f"{op.name}: nothing reads its output; add a sink after it")
        return problems

    def _topological(self) -> list[str]:
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = " -> ".join([*path[path.index(name) :], name])
                raise GraphError(self.source, [f"the graph has a cycle: {cycle}"])
            state[name] = 1
            for up in self.ops[name].inputs():
                visit(up, [*path, name])
            state[name] = 2
            order.append(name)

        for name in self.ops:
            visit(name, [])
        return order

    def _derive(self, op: Any) -> list[str]:
        name = op.name
        ups = op.inputs()
        if not ups:
            n = op.partitions or 1
            self.partitions[name], self.keyed[name] = n, False
            if isinstance(op, FileSource | MqttSource) and n != 1:
                return [f"{name}: a {op.type} has one partition; remove partitions: {n}"]
            return []
        n_in = [self.partitions[u] for u in ups]
        n = op.partitions or n_in[0]
        self.partitions[name] = n
        if isinstance(op, KeyByOp):
            self.keyed[name] = True
            return []
        problems = []
        for u, k in zip(ups, n_in, strict=True):
            if n > k:
                problems.append(
                    f"{name}: partitions: {n} but its input {u!r} has {k}; use at most {k}, "
                    "or put a key_by with more partitions before it"
                )
        forward = all(k == n for k in n_in)
        self.keyed[name] = forward and all(self.keyed[u] for u in ups)
        if isinstance(op, WindowOp | JoinOp) and n > 1 and not self.keyed[name]:
            problems.append(
                f"{name}: a {op.type} with {n} partitions needs its input keyed into as many "
                f"partitions: put a key_by with partitions: {n} before it, or use partitions: 1"
            )
        return problems


def instance_id(name: str, p: int) -> str:
    return f"{name}.{p}"


def parse_graph(data: Any, source: str = "<graph>") -> Graph:
    """A :class:`Graph` from a mapping; GraphError naming each problem."""
    try:
        spec = GraphSpec.model_validate(data)
    except ValidationError as exc:
        raise GraphError(source, [_explain(e, data) for e in exc.errors()]) from None
    return Graph(spec, source)


def load_graph(path: str | Path) -> Graph:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise GraphError(str(path), [f"cannot read it: {exc.strerror}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GraphError(str(path), [f"not valid YAML: {exc}"]) from None
    return parse_graph(data, str(path))


def _explain(err: Mapping[str, Any], data: Any) -> str:
    loc = [x for x in err["loc"] if not (isinstance(x, str) and x in OP_TYPES.split(", "))]
    where = []
    node = data
    for part in loc:
        if isinstance(node, Mapping):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
            label = node.get("name") if isinstance(node, Mapping) else None
            where.append(f"{part} ({label})" if label else str(part))
            continue
        where.append(str(part))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field; check its spelling (the README's Stream graphs section lists them)"
    elif err["type"] == "missing":
        msg = "required field is missing"
    return f"{'.'.join(where) or 'graph'}: {msg}"
