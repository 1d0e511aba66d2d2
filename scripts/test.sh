#!/usr/bin/env bash
# The whole test suite: lint, type check, unit, integration and interop tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
# One worker per core plus two: most of the slow tests wait on the wall clock (a scenario runs
# for its duration, a fault test for its recovery), so extra workers fill the idle time.
# Measured on 2 cores (issue 34, with a cgroup per worker counting every process it starts):
# with 3 workers the suite used 62% of the CPU and took 288-348 s; with 4, 87% and 228 s.  Every
# bound the CPU decides is scaled by the load the test meets (tests/chaos/harness.py,
# cpu.budget), so the fourth worker's load no longer breaks a recovery bound, as it did before.
# The fault tests (quiet and saturated) are collected first and spread over the workers, so the
# longest tests start first (tests/chaos/harness.py); only the tests of one xdist_group stay on
# one worker (tests/conftest.py).  Pass -n 0 to run in this process.
# Let Python cache the project's bytecode (in __pycache__, ignored by git) even where the
# environment says not to (PYTHONDONTWRITEBYTECODE): the suite starts hundreds of Python
# processes (forwarders, services, workers, CLI calls), and without the cache each compiles
# every module of ours it imports, about 0.1 s of CPU for a forwarder or a worker; on a set of
# scenario, CLI and daemon tests that was a fifth of their CPU time.
unset PYTHONDONTWRITEBYTECODE
workers=$(( $(nproc) + 2 ))
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadgroup "$@"
