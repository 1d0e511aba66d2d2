"""Graph files: the operators of a flow, their inputs, partitions and placement.

A graph is YAML (or the same mapping inline in a scenario), validated with pydantic before
anything starts; a bad file gets every problem at once, each with its line, the field and the
fix (``g.yaml:7:5: operators[1].fn: ...``: :mod:`icn.problems`, as the forwarder's config and
scenarios report theirs).  :class:`Graph` then answers the questions the runtime asks: how many
partitions an operator has, which input streams an instance reads (in a fixed order, so that a
replay after a restart sees the same batches in the same order), and who consumes a stream.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable as AnyCallable
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from compute.stream.errors import GraphError
from icn.problems import (
    NotYaml,
    Problem,
    YamlDocument,
    did_you_mean,
    parse_yaml,
    validation_problems,
)
from icn.units import parse_duration

Duration = Annotated[float, BeforeValidator(parse_duration)]
NAME = re.compile(r"^[A-Za-z0-9_-]+$")
CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
MAX_PARTITIONS = 256


def _callable(value: object) -> object:
    if isinstance(value, str) and not CALLABLE.match(value):
        raise ValueError(
            f"{value!r} is not module:function, e.g. apps.demos.stream_demo:to_celsius"
        )
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
    # the fields that name the operators read (where a problem with an input is written)
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ()

    def inputs(self) -> list[str]:
        return [getattr(self, f) for f in self.INPUT_FIELDS]


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
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input",)


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
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("left", "right")


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


StreamId = tuple[str, int]  # (operator, partition)


class Graph:
    """A validated graph and the wiring derived from it.  ``document``: the YAML it was read
    from, so that a problem found later (a function that does not import) has its line."""

    def __init__(
        self, spec: GraphSpec, source: str = "<graph>", document: YamlDocument | None = None
    ) -> None:
        self.spec = spec
        self.source = source
        self.document = document
        self.flow = "/" + spec.flow.strip("/")
        self.settings = spec.settings
        self.ops: dict[str, Any] = {}
        self.index: dict[str, int] = {}  # operator -> its position under operators:
        problems: list[Problem] = []
        for i, op in enumerate(spec.operators):
            if op.name in self.ops:
                problems.append(
                    Problem(
                        ("operators", i, "name"),
                        f"operator {op.name!r} is defined twice (also operators"
                        f"[{self.index[op.name]}]); rename one",
                    )
                )
                continue
            self.ops[op.name] = op
            self.index[op.name] = i
        if not problems:
            problems += self._check_inputs()
        if not problems:
            self.order = self._topological()
            self.partitions: dict[str, int] = {}
            self.keyed: dict[str, bool] = {}
            for name in self.order:
                problems += self._derive(self.ops[name])
        if problems:
            raise self.error(problems)
        self._consumers: dict[StreamId, list[str]] = {}
        for name in self.order:
            for p in range(self.partitions[name]):
                for stream in self.inputs_of(name, p):
                    self._consumers.setdefault(stream, []).append(instance_id(name, p))

    def error(self, problems: list[Problem]) -> GraphError:
        """A GraphError of ``problems``, each with its line when the graph came from a file."""
        if self.document is not None:
            problems = self.document.locate(problems)
        return GraphError(self.source, problems)

    def check_functions(self, names: list[str] | None = None) -> None:
        """Import every function the operators (or those of ``names``) name; GraphError with
        each one that does not import, at its line."""
        problems = []
        for name in self.ops if names is None else names:
            op = self.ops[name]
            for field in ("fn", "reduce"):
                ref = getattr(op, field, None)
                if ref:
                    try:
                        import_function(ref)
                    except ValueError as exc:
                        problems.append(Problem(("operators", self.index[name], field), str(exc)))
        if problems:
            raise self.error(problems)

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

    def _at(self, op: Any, *field: str) -> tuple[str | int, ...]:
        return ("operators", self.index[op.name], *field)

    def _check_inputs(self) -> list[Problem]:
        problems = []
        consumed: set[str] = set()
        names = list(self.ops)
        for op in self.ops.values():
            for field in op.INPUT_FIELDS:
                up = getattr(op, field)
                consumed.add(up)
                if up not in self.ops:
                    msg = f"{up!r} is not an operator" + did_you_mean(up, names, "operators")
                    problems.append(Problem(self._at(op, field), msg))
                elif isinstance(self.ops[up], SINKS):
                    msg = f"{up!r} is a sink, which has no output; read what the sink reads"
                    problems.append(Problem(self._at(op, field), msg))
        for op in self.ops.values():
            if not isinstance(op, SINKS) and op.name not in consumed:
                msg = f"{op.name}: nothing reads its output; add a sink after it"
                problems.append(Problem(self._at(op), msg))
        return problems

    def _topological(self) -> list[str]:
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = " -> ".join([*path[path.index(name) :], name])
                op = self.ops[name]
                msg = f"the graph has a cycle: {cycle}; an operator cannot read its own output"
                raise self.error([Problem(self._at(op, *op.INPUT_FIELDS[:1]), msg)])
            state[name] = 1
            for up in self.ops[name].inputs():
                visit(up, [*path, name])
            state[name] = 2
            order.append(name)

        for name in self.ops:
            visit(name, [])
        return order

    def _derive(self, op: Any) -> list[Problem]:
        name = op.name
        ups = op.inputs()
        if not ups:
            n = op.partitions or 1
            self.partitions[name], self.keyed[name] = n, False
            if isinstance(op, FileSource | MqttSource) and n != 1:
                msg = f"{name}: a {op.type} has one partition; remove partitions: {n}"
                return [Problem(self._at(op, "partitions"), msg)]
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
                msg = (
                    f"{name}: partitions: {n} but its input {u!r} has {k}; use at most {k}, "
                    "or put a key_by with more partitions before it"
                )
                problems.append(Problem(self._at(op, "partitions"), msg))
        forward = all(k == n for k in n_in)
        self.keyed[name] = forward and all(self.keyed[u] for u in ups)
        if isinstance(op, WindowOp | JoinOp) and n > 1 and not self.keyed[name]:
            msg = (
                f"{name}: a {op.type} with {n} partitions needs its input keyed into as many "
                f"partitions: put a key_by with partitions: {n} before it, or use partitions: 1"
            )
            problems.append(Problem(self._at(op, *op.INPUT_FIELDS[:1]), msg))
        return problems


def instance_id(name: str, p: int) -> str:
    return f"{name}.{p}"


def import_function(ref: str) -> AnyCallable[..., Any]:
    """The function ``module:function`` names; ValueError saying why it cannot be had."""
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(f"cannot import {module_name!r} for {ref}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{module_name} has no function {attr!r} (from {ref})")
    return fn  # type: ignore[no-any-return]


def parse_graph(data: Any, source: str = "<graph>", document: YamlDocument | None = None) -> Graph:
    """A :class:`Graph` from a mapping; GraphError naming every problem (with its line when
    ``document``, the YAML the mapping was read from, is given)."""
    problems = document.duplicate_keys() if document is not None else []
    spec = None
    if not isinstance(data, Mapping):
        got = "empty" if data is None else f"a {type(data).__name__}"
        problems.append(
            Problem((), f"a graph is a mapping of flow, operators, settings; got {got}")
        )
    else:
        try:
            spec = GraphSpec.model_validate(data)
        except ValidationError as exc:
            problems += validation_problems(exc.errors(), GraphSpec)
    if problems or spec is None:
        if document is not None:
            problems = document.locate(problems)
        raise GraphError(source, problems)
    return Graph(spec, source, document)


def load_graph(path: str | Path, check_functions: bool = False) -> Graph:
    """The graph in a YAML file; GraphError with every problem at its line.  With
    ``check_functions``, the functions its operators name are imported too (a typo in
    ``module:function`` is found now, not mid-run)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise GraphError(
            str(path), [Problem((), f"cannot read the file: {exc.strerror}", file=str(path))]
        ) from None
    try:
        document = parse_yaml(text)
    except NotYaml as exc:
        raise GraphError(str(path), [exc.problem]) from None
    graph = parse_graph(document.data, str(path), document)
    if check_functions:
        graph.check_functions()
    return graph
