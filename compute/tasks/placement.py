"""Where a task goes (sans-IO: loads in, a choice out; no sockets, time passed in).

CFN's rule: to the executor holding the task's largest input when it has room, else to the
least loaded one that can take it (enough CPU slots and free memory).  Loads come from each
executor's answers and from its load advertisement (``/cfn/load/<id>``); calls this caller has
in flight there count too, as the advertisement lags.  An executor that refused a call (full)
is passed over for a moment; one that failed a call (lost) for longer, until it advertises
again.
"""

from __future__ import annotations

from dataclasses import dataclass

FULL_BACKOFF = 0.05  # seconds an executor that said "full" is passed over
LOST_BACKOFF = 5.0  # seconds an executor that failed a call is passed over (unless it answers)
ROOM_PER_SLOT = 4  # calls queued per CPU slot before an executor counts as without room
# calls one caller keeps in flight at one executor: more wait here for one to end, rather than
# being refused there (its RMI server and the forwarder's share of the face Nack beyond)
MAX_INFLIGHT = 48
# a task shorter than this (seconds) costs less than the round trip that brings the next one:
# then the executor gets up to MAX_INFLIGHT at once, so it never waits for work
SHORT_TASK = 0.002


@dataclass
class ExecutorState:
    node: str
    slots: float = 1.0  # CPU slots (--num-cpus)
    memory: int = 0  # bytes free for tasks that ask for memory (0: not limited)
    memory_total: int = 0  # bytes in all for such tasks (0: not limited)
    load: int = 0  # calls in progress there, as last reported
    inflight: int = 0  # calls this caller has sent there and not seen answered
    passed_until: float = 0.0
    lost: bool = False
    run_time: float = 1.0  # recent tasks' run time there (seconds, moving average)

    def queued(self) -> int:
        return max(self.load, self.inflight)

    def window(self) -> int:
        """Calls this caller may have in flight here: a few per slot.  The rest wait at the
        caller and go to whichever executor frees a slot first, so a long job's tail is not
        stuck in one executor's queue while another idles (what work stealing does for Dask)."""
        if self.run_time < SHORT_TASK:
            return MAX_INFLIGHT
        return min(MAX_INFLIGHT, max(2, int(self.slots * ROOM_PER_SLOT)))

    def has_room(self) -> bool:
        return self.queued() < max(1.0, self.slots) * ROOM_PER_SLOT

    def fits(self, num_cpus: float, memory: int) -> bool:
        """Whether it can take the call now (its free memory)."""
        return self.slots >= num_cpus and (
            memory == 0 or self.memory_total == 0 or self.memory >= memory
        )

    def could_fit(self, num_cpus: float, memory: int) -> bool:
        """Whether it could ever take the call (its whole memory)."""
        return self.slots >= num_cpus and (
            memory == 0 or self.memory_total == 0 or self.memory_total >= memory
        )


class Placement:
    """The executors a caller knows and the choice of one per call."""

    def __init__(self) -> None:
        self.executors: dict[str, ExecutorState] = {}
        self.local_first: list[str] = []  # tie-break order (the caller's own node first)
        self.chosen_for_locality = 0
        self.chosen_by_load = 0

    def know(self, node: str) -> ExecutorState:
        state = self.executors.get(node)
        if state is None:
            state = self.executors[node] = ExecutorState(node)
        return state

    def forget_missing(self, present: set[str]) -> None:
        for node in list(self.executors):
            if node not in present:
                del self.executors[node]

    def report(
        self, node: str, load: int, slots: float, memory: int, now: float, memory_total: int = 0
    ) -> None:
        """What an executor said of itself (in an answer or its advertisement): calls in
        progress, CPU slots, free and whole memory for tasks that ask for it (0: no limit)."""
        state = self.know(node)
        state.load, state.slots, state.memory = load, slots, memory
        state.memory_total = memory_total
        if state.lost:
            state.lost = False
            state.passed_until = 0.0

    def ran(self, node: str, seconds: float) -> None:
        """A task ran ``seconds`` there (its executor's measure, queueing left out)."""
        state = self.know(node)
        state.run_time += 0.25 * (seconds - state.run_time)

    def full(self, node: str, now: float) -> None:
        self.know(node).passed_until = now + FULL_BACKOFF

    def lost(self, node: str, now: float) -> None:
        state = self.know(node)
        state.lost = True
        state.passed_until = now + LOST_BACKOFF

    def infeasible(self, num_cpus: float, memory: int) -> str | None:
        """Why no executor known could ever take a call needing ``num_cpus`` and ``memory``
        (whatever their load), or None when one could."""
        states = self.executors.values()
        if not self.executors or any(s.could_fit(num_cpus, memory) for s in states):
            return None
        cpus = max(s.slots for s in states)
        mem = max(s.memory_total for s in states)
        return (
            f"it needs {num_cpus:g} CPUs and {memory} bytes of memory; the executors have at "
            f"most {cpus:g} CPUs and {mem} bytes (start one with more: icn tasks executor "
            "--num-cpus N --memory-mb M)"
        )

    def choose(
        self,
        num_cpus: float,
        memory: int,
        inputs: list[tuple[list[str], int]],
        now: float,
        avoid: frozenset[str] = frozenset(),
    ) -> str | None:
        """The executor for a call needing ``num_cpus`` and ``memory`` whose reference
        arguments are ``inputs`` (holders, bytes); None when none can take it now."""
        usable = [
            s
            for s in self.executors.values()
            if s.node not in avoid
            and s.passed_until <= now
            and s.inflight < s.window()
            and s.fits(num_cpus, memory)
        ]
        if not usable:
            return None
        if inputs:
            holders, size = max(inputs, key=lambda i: i[1])
            if size > 0:
                for s in usable:
                    if s.node in holders and s.has_room():
                        self.chosen_for_locality += 1
                        return s.node
        order = {n: i for i, n in enumerate(self.local_first)}
        best = min(
            usable,
            key=lambda s: (s.queued() / max(s.slots, 0.5), order.get(s.node, len(order)), s.node),
        )
        self.chosen_by_load += 1
        return best.node
