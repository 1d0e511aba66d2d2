"""The chaos harness as a pytest plugin (loaded by tests/conftest.py).

A test marked ``@pytest.mark.fault`` (it kills, restarts or cuts something and checks what
survives) runs twice: ``[quiet]`` as it is, and ``[saturated]`` with one busy process per core
running beside it (:class:`~tests.chaos.contention.Contention`), with the same assertions.  It
gets its deadlines from the ``cpu`` fixture: ``cpu.budget(seconds)`` is ``seconds`` times the
contention measured when the test started (:func:`~tests.chaos.contention.time_scale`), so a
budget grows with the load the test really meets rather than being loosened for the worst case.

``pytest -m fault`` runs only these tests; ``-k saturated`` only their saturated runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.chaos.contention import Contention, baseline, time_scale

LOADS = ("quiet", "saturated")


@dataclass
class CpuLoad:
    """What a test runs beside: ``kind`` (quiet, saturated, or unmeasured for a test not marked
    fault), the measured ``scale`` and the busy processes' PIDs."""

    kind: str
    scale: float = 1.0
    pids: list[int] = field(default_factory=list)

    def budget(self, seconds: float) -> float:
        """A deadline of ``seconds`` on a quiet machine, scaled to the most load this test has
        met: measured when it started (fault tests) or when it first asked for a budget, and
        again now.  Under pytest-xdist the other workers' tests come and go while this one
        runs, and a bound checked after the fact (a recovery time) must count the load the run
        met, not only the load at its start: a test that checks a bound after its run asks for
        a budget before it too (its timeout, say), so that the larger of the two is kept.  A
        test that never asks pays nothing (a measurement costs about 30 ms of CPU)."""
        self.scale = max(self.scale, time_scale())
        return seconds * self.scale


def pytest_sessionstart(session: pytest.Session) -> None:
    baseline()  # the calibration's quiet reference, before any contention


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Fault tests are collected first, so that under pytest-xdist every worker starts on them
    # at once: they are the longest tests, and the suite ends soonest when they start first.
    # They are not kept on one worker.  Run one after another there (an xdist group), the 18
    # saturated runs alone made a chain of 4 to 5 minutes, with their busy processes loading
    # the other workers the whole time: the suite took 7:43 instead of 5:30, and quiet runs
    # beside that chain missed their bounds.  Two saturated runs may meet, each then sharing
    # the cores with the other's busy processes too; their budgets scale with the load each
    # measures (clamped at MAX_SCALE), which is what they are for.
    items.sort(key=lambda item: item.get_closest_marker("fault") is None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("fault") is not None:
        metafunc.parametrize("cpu", LOADS, indirect=True)


@pytest.fixture(autouse=True)
def cpu(request: pytest.FixtureRequest) -> Iterator[CpuLoad]:
    """The load a fault test runs under (autouse so that the parametrization above can reach
    every marked test; other tests get an "unmeasured" load, measured only when they ask for a
    budget)."""
    kind = getattr(request, "param", None)
    if kind is None:
        yield CpuLoad("unmeasured")
        return
    if kind == "quiet":
        load = CpuLoad(kind, time_scale())
        request.node.user_properties.append(("time_scale", load.scale))
        yield load
        return
    with Contention() as contention:
        load = CpuLoad(kind, time_scale(), contention.pids)
        request.node.user_properties.append(("time_scale", load.scale))
        yield load
