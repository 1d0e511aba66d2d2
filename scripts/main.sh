#!/usr/bin/env bash
# The main job: run scenarios/quickstart.yaml on the local backend (three forwarders in a line on
# loopback, a producer and a consumer), print the summary and write the report and plots.
# Extra arguments go to `icn scenario run` (e.g. --out DIR, --backend netns).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/icn scenario run scenarios/quickstart.yaml "$@"
