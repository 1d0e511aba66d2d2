"""Running operator instances of a graph on one endpoint: all of them (``icn flow run``), or
those placed on one node (a scenario's flow service)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from compute.stream.errors import StreamError
from compute.stream.graph import SINKS, Graph, StreamId
from compute.stream.instance import Instance
from icn.dataplane.endpoint import Endpoint

if TYPE_CHECKING:
    from icn.security.trust import Validator


class FlowRun:
    """The instances ``which`` (default: every instance) of ``graph``, each on an endpoint
    of its own from ``connect`` (a forwarder does not send an Interest back out of the face it
    came in by, so two instances on one face could not read each other).

    ``validator`` (opt-in): every batch an instance reads is handed over only once it accepts
    it (:mod:`compute.stream.inlet`); it fetches missing certificates through its own
    ``fetch`` (:func:`icn.dataplane.validating.cert_fetcher` of an endpoint here).  What the
    instances publish is signed by their endpoint's ``signer`` (a
    :class:`~icn.security.certs.CertSigner` for readers that validate)."""

    def __init__(
        self,
        graph: Graph,
        connect: Callable[[], Awaitable[Endpoint]],
        which: list[StreamId] | None = None,
        *,
        state_dir: Path | None = None,
        register: bool = True,
        validator: Validator | None = None,
    ) -> None:
        self.graph = graph
        self.connect = connect
        self.chosen = graph.instances() if which is None else which
        if not self.chosen:
            raise StreamError(f"{graph.source}: no operator to run here")
        self.state_dir = state_dir
        self.register = register
        self.validator = validator
        self.instances: list[Instance] = []
        self.endpoints: list[Endpoint] = []
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def sinks(self) -> list[Instance]:
        """The sink instances run here."""
        return [i for i in self.instances if isinstance(i.op, SINKS)]

    def totals(self) -> Counter[str]:
        """Every instance's counters added up (records, batches, retransmissions...)."""
        total: Counter[str] = Counter()
        for inst in self.instances:
            total.update(inst.counters)
        return total

    async def start(self) -> None:
        """Connect and open every chosen instance (streams registered, sources subscribed),
        then run them."""
        for name, p in self.chosen:
            ep = await self.connect()
            self.endpoints.append(ep)
            inst = Instance(
                self.graph, name, p, ep, state_dir=self.state_dir, register=self.register,
                validator=self.validator,
            )  # fmt: skip
            self.instances.append(inst)
            await inst.open()
        self._tasks = [asyncio.ensure_future(inst.run()) for inst in self.instances]

    async def wait(
        self, timeout: float | None = None, progress: Callable[[FlowRun], None] | None = None
    ) -> bool:
        """Until every sink here has ended (or, with no sink here, every instance), an
        instance fails (its error is raised) or ``timeout`` passes (returns False)."""
        targets = self.sinks or self.instances
        waits = [t for t, i in zip(self._tasks, self.instances, strict=True) if i in targets]
        loop = asyncio.get_running_loop()
        until = None if timeout is None else loop.time() + timeout
        while True:
            left = None if until is None else until - loop.time()
            if left is not None and left <= 0:
                return False
            step = 1.0 if left is None else min(1.0, left)
            done, _ = await asyncio.wait(self._tasks, timeout=step, return_when="FIRST_EXCEPTION")
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if all(t.done() for t in waits):
                return True
            if progress is not None:
                progress(self)

    async def stop(self) -> None:
        """Stop every instance, then close them (inputs, outputs, sources, sinks) and their
        endpoints."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for inst in self.instances:
            await inst.close()
        for ep in self.endpoints:
            ep.close()
