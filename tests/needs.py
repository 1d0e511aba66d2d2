"""What a test needs from the machine beyond the project (torch, mosquitto, root, iproute2),
asked in one way, and a pytest plugin (loaded by tests/conftest.py) that enforces it.

``pytestmark = needs(present, why)`` (a module) or ``@needs(present, why)`` (a test): when
``present`` is false, the tests are skipped with ``why`` on a machine set up by hand, and fail
under CI (``CI`` set, as CI services do, and not "false" or "0"), whose set-up provides every one
of them (scripts/bootstrap.sh installs the extras, mosquitto and iproute2, and runs as root
there): a CI run must not pass green without running the tests the docs promise.  They fail
each at its set-up, so the rest of the suite still runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

MARK = "needs_missing"


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def needs(present: bool, why: str) -> pytest.MarkDecorator:
    """Nothing when ``present``; else a skip with ``why``, or under CI a failure."""
    if present:
        return pytest.mark.skipif(False, reason=why)
    if under_ci():
        missing: pytest.MarkDecorator = getattr(pytest.mark, MARK)(why)
        return missing
    return pytest.mark.skip(reason=why)


def has_module(name: str) -> bool:
    """Whether ``name`` can be imported (found, not imported: importing torch costs seconds)."""
    return importlib.util.find_spec(name) is not None


def is_root_with(*commands: str) -> bool:
    """Whether this process is root and every one of ``commands`` is on the PATH."""
    return os.geteuid() == 0 and all(shutil.which(c) is not None for c in commands)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARK}(why): something the test needs is missing under CI: it fails"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    mark = item.get_closest_marker(MARK)
    if mark is not None:
        pytest.fail(
            f"{mark.args[0]}; under CI it must be there (scripts/bootstrap.sh)", pytrace=False
        )
