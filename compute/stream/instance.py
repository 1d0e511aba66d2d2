"""One operator instance (an operator's partition) at work: read one batch from each input
stream in a fixed order, run the operator, publish the output as the next batches of its
stream, and checkpoint now and then.

Push-back: before each step the instance waits until its stream has room (its slowest reader
is less than ``buffer`` batches behind); meanwhile it asks its own inputs for nothing new, so a
slow sink stops the operators before it, step by step, back to the source.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compute.stream.batch import (
    END_OF_TIME,
    NO_WATERMARK,
    Batch,
    Output,
    encode_batches,
    output_records,
)
from compute.stream.checkpoint import Checkpoints, Entry
from compute.stream.graph import (
    SINKS,
    SOURCES,
    FilterOp,
    FlatMapOp,
    Graph,
    JoinOp,
    KeyByOp,
    MapOp,
    WindowOp,
    instance_id,
)
from compute.stream.inlet import Inlet
from compute.stream.names import FlowNames
from compute.stream.operators import JoinStep, KeyByStep, MapStep, Step, WindowStep
from compute.stream.outbox import RETAIN_FACTOR, Outbox
from compute.stream.sinks import Sink, make_sink
from compute.stream.sourcelog import SourceLog
from compute.stream.sources import Source, make_source
from icn.dataplane.endpoint import Endpoint

if TYPE_CHECKING:
    from icn.security.trust import Validator

log = logging.getLogger(__name__)
REPORT_EVERY = 0.05  # seconds between progress reports to producers (when there is progress)
REPORTS_PER_LEAD = 4  # ... at most a quarter of the graph's lead, so producers keep running
MIN_REPORT_EVERY = 0.001  # ... but not more often than this (a lead of 1us must not spin)
REPORT_IDLE = 0.5  # ... and at least this often (a restarted producer learns where we are)
FINAL_REPORT = 5.0  # seconds an ended instance keeps telling its producers it is done


def make_step(graph: Graph, name: str, p: int, counters: Counter[str]) -> Step:
    op = graph.ops[name]
    if isinstance(op, MapOp | FilterOp | FlatMapOp):
        return MapStep(op, counters)
    if isinstance(op, KeyByOp):
        return KeyByStep(op, p, graph.partitions[name], counters)
    if isinstance(op, WindowOp):
        return WindowStep(op, counters)
    if isinstance(op, JoinOp):
        n_left = len([s for s in graph.inputs_of(name, p) if s[0] == op.left])
        return JoinStep(op, n_left, counters)
    raise TypeError(f"{name}: no step for {op.type}")


class Instance:
    def __init__(
        self,
        graph: Graph,
        name: str,
        partition: int,
        ep: Endpoint,
        *,
        state_dir: Path | None = None,
        register: bool = True,
        validator: Validator | None = None,
    ) -> None:
        self.graph = graph
        self.name = name
        self.partition = partition
        self.id = instance_id(name, partition)
        self.ep = ep
        self.register = register
        self.validator = validator  # checks every batch read (compute.stream.inlet); opt-in
        self.counters: Counter[str] = Counter()
        self.op = graph.ops[name]
        settings = graph.settings
        self.names = FlowNames(graph.flow)
        self.stream = self.names.stream(name, partition)
        self.readers = graph.consumers_of((name, partition))
        self.checkpoint_every = settings.checkpoint
        base = Path(settings.state_dir or "state") if state_dir is None else state_dir
        stem = f"{graph.flow.strip('/').replace('/', '_')}/{self.id}"
        self.checkpoints = Checkpoints(base / f"{stem}.ckpt") if self.checkpoint_every else None
        self.source: Source | None = None
        self.sink: Sink | None = None
        self.step: Step | None = None
        n = graph.partitions[name]
        if isinstance(self.op, SOURCES):
            self.source = make_source(
                self.op, self.id, partition, n, self.counters, graph.settings.linger
            )
        elif isinstance(self.op, SINKS):
            self.sink = make_sink(self.op, self.id, partition, self.counters)
        else:
            self.step = make_step(graph, name, partition, self.counters)
        self.log = SourceLog(base / f"{stem}.log") if self.source and self.source.logged else None
        self.in_pos = 0
        self.watermark = NO_WATERMARK
        self.watermark_step = graph.watermark_step(name)
        self._last_ckpt = 0.0  # when the newest checkpoint was saved
        self._ckpt_pos = -1  # ... at which input position
        self._ckpt_readers: dict[str, tuple[int, int]] = {}  # ... with these readers' positions
        # True while run() waits for the next step's input: nothing of that step has touched
        # the state yet, so a checkpoint taken then is one taken between two steps
        self._waiting_input = False
        self.outbox: Outbox | None = None
        self.inlets: list[Inlet] = []
        self.done = asyncio.Event()  # every input consumed and (sinks) written
        self._reporter: asyncio.Future[None] | None = None
        self._last_report = (-1, -1)
        self._last_report_at = 0.0
        # a producer stops `buffer` batches or `lead` seconds ahead of its slowest reader:
        # report before either (each report is a packet each way through the forwarder)
        settings = graph.settings
        self._report_every = max(
            MIN_REPORT_EVERY, min(REPORT_EVERY, settings.lead / REPORTS_PER_LEAD)
        )
        self._report_steps = max(1, settings.buffer // 2)
        if all(len(graph.consumers_of(stream)) == 1 for stream in graph.inputs_of(name, partition)):
            # the only reader of each input: our batch Interests tell the producers how far
            # we are (Outbox._asked); reports only need to keep its kept batches bounded
            self._report_every = REPORT_EVERY
            self._report_steps = max(1, settings.buffer * RETAIN_FACTOR // 4)

    @staticmethod
    def check(graph: Graph, name: str) -> None:
        """Import the functions operator ``name`` names (GraphError naming the field)."""
        graph.check_functions([name])

    # ---- start and restore --------------------------------------------------------------------

    def _restore(self) -> tuple[int, dict[str, tuple[int, int]]]:
        """The input position and output sequence to resume from; the readers' positions."""
        if self.checkpoints is None:
            return 0, {}
        self.checkpoints.load()
        readers = self.checkpoints.readers
        entry = self.checkpoints.restore_point()
        if entry is None:
            return 0, readers
        self.in_pos = entry.in_pos
        state = entry.state
        if self.step is not None:
            self.step.restore(state["step"])
        if self.source is not None:
            self.source.restore(state["source"])
        if self.sink is not None:
            self.sink.restore(state["sink"])
        self.watermark = state["wm"]
        self.counters["restored"] += 1
        log.info("%s: resumed from its checkpoint at input %d", self.id, entry.in_pos)
        return entry.out_seq, readers

    async def open(self) -> None:
        out_seq, readers = self._restore()
        s = self.graph.settings
        if self.sink is None:
            self.outbox = Outbox(
                self.ep,
                self.stream,
                self.readers,
                buffer=s.buffer,
                counters=self.counters,
                next_seq=out_seq,
                positions=readers,
                lead=s.lead,
                reader_window=s.window,
            )
            if self.log is not None:
                for seq, content in sorted(self.log.load().items()):
                    self.outbox.restore(seq, content)
            await self.outbox.start(register=self.register)
        for up, q in self.graph.inputs_of(self.name, self.partition):
            inlet = Inlet(
                self.ep,
                self.names.stream(up, q),
                self.id,
                next_seq=self.in_pos,
                max_window=s.window,
                lifetime_ms=max(1, round(s.lifetime * 1000)),
                counters=self.counters,
                validator=self.validator,
            )
            inlet.start()
            self.inlets.append(inlet)
        if self.source is not None:
            await self.source.open()
        if self.sink is not None:
            await self.sink.open()
        if self.checkpoints is not None and not self.checkpoints.entries:
            self._checkpoint()  # the start is a restore point too: a reader may need it

    async def close(self) -> None:
        if self._reporter is not None:
            self._reporter.cancel()
        for inlet in self.inlets:
            await inlet.close()
        if self.outbox is not None:
            await self.outbox.close()
        for part in (self.source, self.sink):
            if part is not None:
                with contextlib.suppress(Exception):
                    await part.close()

    # ---- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Steps until every input has ended (forever for an endless source)."""
        self._last_ckpt = time.monotonic()
        if self.inlets:
            # kept up after the last step too, until close(): a lost final report is repeated
            self._reporter = asyncio.ensure_future(self._report_loop())
        while True:
            if self.outbox is not None:
                await self.outbox.wait_room()
            self._waiting_input = self.source is None
            records, watermark, end = await self._one_step()
            self._waiting_input = False
            await self._emit(records, watermark, end)
            self.in_pos += 1
            self.watermark = max(self.watermark, watermark)
            self.counters["steps"] += 1
            now = time.monotonic()
            if self.checkpoint_every and (end or now - self._last_ckpt >= self.checkpoint_every):
                self._checkpoint()
            self._report()
            if end:
                break
        if self.outbox is not None:
            await self.outbox.drained()  # readers have every batch, in a checkpoint
            if self.checkpoints is not None:
                self._checkpoint()  # saved with those readers' positions: durable is in_pos
        if self.inlets:
            # only now is the last checkpoint one no reader needs to go back behind: tell the
            # producers, which wait for it before they go in turn
            position = (self.in_pos, self.durable)
            await asyncio.gather(
                *(inlet.report_answered(*position, within=FINAL_REPORT) for inlet in self.inlets)
            )
        self.done.set()

    async def _one_step(self) -> tuple[Output, int, bool]:
        if self.source is not None:
            records, watermark, end = await self.source.step()
            self.counters["records_in"] += len(records)  # what it read, as an inlet counts
            return records, watermark, end
        batches: list[Batch] = [await inlet.get() for inlet in self.inlets]
        watermark = min(inlet.watermark for inlet in self.inlets)
        ended = all(inlet.ended for inlet in self.inlets)
        if self.step is None:
            return [r for b in batches for r in b.records], watermark, ended
        return self.step.run(batches, watermark, ended), watermark, ended

    async def _emit(self, records: Output, watermark: int, end: bool) -> None:
        if self.sink is not None:
            await self.sink.write(output_records(records))
            return
        assert self.outbox is not None
        if not len(records) and not end and not self._watermark_matters(watermark):
            self.counters["watermarks_held"] += 1
            return
        self.counters["records"] += len(records)
        for content in encode_batches(
            records,
            max(watermark, self.watermark),
            end,
            limit=self.graph.settings.batch_bytes,
            previous_watermark=self.watermark,
        ):
            if self.log is not None:
                self.log.append(self.outbox.next_seq, content)
            self.outbox.put(content)
        if self.source is not None:
            self.source.acknowledge()
        if self.log is not None:
            self.log.forget_below(self.outbox.low)

    def _watermark_matters(self, watermark: int) -> bool:
        """Whether an output with no records but this watermark must go (``watermark_step``
        in graph.py).  Decided from the watermarks alone, so a replay after a restart sends
        the same batches."""
        step = self.watermark_step
        if step is None or watermark <= self.watermark:
            return False
        if self.watermark == NO_WATERMARK or watermark >= END_OF_TIME:
            return True
        return watermark // step > self.watermark // step

    def _checkpoint_idle(self) -> None:
        """A checkpoint of the steps made since the last one, while no input comes.  Readers
        wait for our checkpoints before their producers may drop batches, and an operator
        that sends rarely (a window) makes its readers step rarely: without this, a sink's
        last steps before a pause stay out of any checkpoint, and the producers back to the
        source keep every batch since, until they stop for room, and the pause never ends.
        Likewise when only our readers moved on: the restore point our producers may drop
        batches behind is taken from the readers' positions saved in a checkpoint."""
        readers = self.outbox.positions if self.outbox is not None else {}
        if (
            self.checkpoints is not None
            and self._waiting_input
            and (self.in_pos > self._ckpt_pos or readers != self._ckpt_readers)
            and time.monotonic() - self._last_ckpt >= (self.checkpoint_every or 0)
        ):
            self.counters["checkpoints_idle"] += 1
            self._checkpoint()

    def _checkpoint(self) -> None:
        assert self.checkpoints is not None
        self._last_ckpt, self._ckpt_pos = time.monotonic(), self.in_pos
        self._ckpt_readers = dict(self.outbox.positions) if self.outbox is not None else {}
        state: dict[str, Any] = {"wm": self.watermark}
        if self.step is not None:
            state["step"] = self.step.snapshot()
        if self.source is not None:
            state["source"] = self.source.snapshot()
        if self.sink is not None:
            self.sink.sync()
            state["sink"] = self.sink.snapshot()
        out_seq = self.outbox.next_seq if self.outbox is not None else 0
        readers = dict(self.outbox.positions) if self.outbox is not None else {}
        self.checkpoints.save(Entry(self.in_pos, out_seq, state), readers)
        self.counters["checkpoints"] += 1

    # ---- progress reports to producers ----------------------------------------------------

    @property
    def durable(self) -> int:
        """The input position a restart would resume from (producers keep what follows).

        Taken with the readers' positions saved in the checkpoint file, as a restart takes
        them, never the live ones: those are ahead of the file until the next checkpoint, and
        a producer told a position from them drops batches that an instance killed before
        that checkpoint resumes behind, and asks for forever."""
        if self.checkpoints is None:
            return self.in_pos
        point = self.checkpoints.restore_point()
        return 0 if point is None else point.in_pos

    def _report(self, force: bool = False) -> None:
        now = time.monotonic()
        position = (self.in_pos, self.durable)
        if not self.inlets or (
            not force
            and (
                position == self._last_report
                or (
                    now - self._last_report_at < self._report_every
                    and self.in_pos - self._last_report[0] < self._report_steps
                )
            )
        ):
            return
        for inlet in self.inlets:
            inlet.report(*position)
        self._last_report, self._last_report_at = position, now

    async def _report_loop(self) -> None:
        while True:
            await asyncio.sleep(self._report_every)
            self._checkpoint_idle()
            idle = time.monotonic() - self._last_report_at >= REPORT_IDLE
            self._report(force=idle or self.in_pos > self._last_report[0])
