#!/usr/bin/env bash
# The whole test suite: lint, type check, unit, integration and interop tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
# One worker per core plus one: most of the slow tests wait on the wall clock (a scenario runs for
# its duration, a fault test for its recovery), so a third worker on 2 cores fills the idle time
# (measured on 2 cores: 4:34 with 2 workers, 3:53 with 3; with 4 a saturated fault test met
# more load than its budget allows).  The fault tests (quiet and saturated) are collected
# first and spread over the workers, so the longest tests start first (tests/chaos/harness.py);
# only the tests of one xdist_group stay on one worker (tests/conftest.py).  Pass -n 0 to run
# in this process.
# Let Python cache the project's bytecode (in __pycache__, ignored by git) even where the
# environment says not to (PYTHONDONTWRITEBYTECODE): the suite starts hundreds of Python
# processes (forwarders, services, workers, CLI calls), and without the cache each compiles
# every module of ours it imports, about 0.1 s of CPU for a forwarder or a worker; on a set of
# scenario, CLI and daemon tests that was a fifth of their CPU time.
unset PYTHONDONTWRITEBYTECODE
workers=$(( $(nproc) + 1 ))
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadgroup "$@"
