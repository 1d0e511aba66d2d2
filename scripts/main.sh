#!/usr/bin/env bash
# The main job: start a small topology on loopback and fetch data through it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/icn demo "$@"
