"""Shared fixtures: a temporary directory that is always removed; the chaos harness (fault tests
run quiet and with the CPU saturated, see tests/chaos/harness.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ("tests.chaos.harness",)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="icn-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
