"""Shared fixtures: a temporary directory that is always removed; the chaos harness (fault tests
run quiet and with the CPU saturated, see tests/chaos/harness.py); what a test needs from the
machine, skipped when missing but failed under CI (tests/needs.py); xdist groups that hold under
pytest 9."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ("tests.chaos.harness", "tests.needs", "tests.cpu_per_test")


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="icn-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``, give each test in an ``xdist_group`` the ``@group`` suffix
    the scheduler keeps on one worker.  pytest-xdist 3.8 writes it to ``item._nodeid``, which
    pytest 9 no longer reads (an item's id is ``item._id``), so every group was spread over
    the workers: the fault tests ran side by side, and a module sharing one Ray cluster
    (tests/integration/scenario/test_ray_backend.py) started one per worker.  Runs last, after
    the chaos harness has marked its tests; does nothing where the suffix is already there."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            from _pytest.nodeid import coerce_node_id  # pytest 9's: reached there only

            item._id = coerce_node_id(item.nodeid + suffix)
