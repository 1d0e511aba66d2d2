#!/usr/bin/env bash
# The whole test suite: lint, type check, unit, integration and interop tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
# one worker per core; the fault tests (quiet and saturated) run one after another on one of
# them, see tests/chaos/harness.py.  Pass -n 0 to run in this process
.venv/bin/python -m pytest -q -p no:cacheprovider -n auto --dist loadgroup "$@"
