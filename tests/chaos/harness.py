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
        met: measured when it started and again now.  Under pytest-xdist the other worker's
        tests come and go while this one runs, and a bound checked after the fact (a recovery
        time) must count the load the run met, not only the load at its start."""
        if self.kind != "unmeasured":
            self.scale = max(self.scale, time_scale())
        return seconds * self.scale


def pytest_sessionstart(session: pytest.Session) -> None:
    baseline()  # the calibration's quiet reference, before any contention


def _saturated(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("cpu") == "saturated"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Under pytest-xdist every saturated run is in one group, so on one worker, one at a time:
    # two side by side would each meet the other's busy processes as well as their own.  The
    # quiet runs are spread like any test (with the other workers busy they were never quiet
    # under xdist anyway; their budgets scale with the load they meet).  All of the fault tests
    # in one group made a chain of 5 to 8 minutes on 2 cores, longer than the whole suite may
    # take (pytest 9 had silently ignored the group until tests/conftest.py restored it).
    for item in items:
        if _saturated(item):
            item.add_marker(pytest.mark.xdist_group("saturated"))
    # ...and first: that worker runs them one after another (about 3 minutes on 2 cores), so
    # the suite ends soonest when it starts them at once and the other workers share out the
    # rest around it
    items.sort(key=lambda item: not _saturated(item))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("fault") is not None:
        metafunc.parametrize("cpu", LOADS, indirect=True)


@pytest.fixture(autouse=True)
def cpu(request: pytest.FixtureRequest) -> Iterator[CpuLoad]:
    """The load a fault test runs under (autouse so that the parametrization above can reach
    every marked test; other tests get an unmeasured load of scale 1 and pay nothing)."""
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
