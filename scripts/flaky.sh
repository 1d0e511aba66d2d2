#!/usr/bin/env bash
# Run the whole suite (scripts/test.sh) N times in a row, to find flaky tests:
#
#   scripts/flaky.sh N [--load] [-- extra arguments for scripts/test.sh, e.g. -k scenario]
#
# --load runs one busy loop per core beside every run (started and stopped by PID), as a loaded
# machine or a busy CI runner would.  Prints each run's outcome, failures and times (pytest's,
# and the whole command's with lint and types), then the tests that ever failed and how often.
# Each run's full output stays in the log folder it names.  Exit status: 0 when every run
# passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    echo "usage: scripts/flaky.sh N [--load] [-- arguments for scripts/test.sh]" >&2
    echo "  N: how many runs (a whole number, at least 1); --load: one busy loop per core" >&2
    exit 2
}

[ $# -ge 1 ] || usage
runs=$1
shift
case "$runs" in
    '' | *[!0-9]*) echo "flaky.sh: N must be a whole number of runs, not '$runs'" >&2; usage ;;
esac
[ "$runs" -ge 1 ] || { echo "flaky.sh: N must be at least 1" >&2; usage; }
load=0
while [ $# -gt 0 ]; do
    case "$1" in
        --load) load=1; shift ;;
        --) shift; break ;;
        *) echo "flaky.sh: unknown option '$1'" >&2; usage ;;
    esac
done

logs=$(mktemp -d "${TMPDIR:-/tmp}/icn-flaky-XXXXXX")
busy=()
stop_busy() {
    for pid in "${busy[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    busy=()
}
trap stop_busy EXIT
trap 'stop_busy; exit 130' INT TERM

scripts/bootstrap.sh  # once, before the first timed run
echo "flaky.sh: $runs run(s) of scripts/test.sh $*$([ $load = 1 ] && echo ' beside one busy loop per core'); logs in $logs"
failed_runs=0
for i in $(seq 1 "$runs"); do
    if [ $load = 1 ]; then
        for _ in $(seq 1 "$(nproc)"); do
            # a busy loop that also ends by itself if this script is killed outright
            python3 -S -c 'import os, time
parent, end = os.getppid(), time.monotonic() + 3600
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(200_000): pass' &
            busy+=("$!")
        done
    fi
    log="$logs/run-$i.log"
    started=$(date +%s)
    status=0
    scripts/test.sh "$@" >"$log" 2>&1 || status=$?
    seconds=$(( $(date +%s) - started ))
    stop_busy
    # pytest's last line, e.g. "2 failed, 1896 passed in 385.12s (0:06:25)"
    summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error)' "$log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')
    pytest_s=$(sed -nE 's/.* in ([0-9.]+)s.*/\1/p' <<<"$summary")
    if [ "$status" = 0 ]; then
        echo "run $i: passed: ${summary:-no pytest summary}; pytest ${pytest_s:-?} s, whole ${seconds} s"
    else
        failed_runs=$((failed_runs + 1))
        echo "run $i: FAILED (exit $status): ${summary:-no pytest summary (lint, types or set-up failed; see $log)}; pytest ${pytest_s:-?} s, whole ${seconds} s"
        grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /' || true
    fi
done

echo
echo "flaky.sh: $((runs - failed_runs)) of $runs run(s) passed"
# "FAILED tests/x.py::test_y - AssertionError..." -> the test id, counted over the runs
ever=$(cat "$logs"/run-*.log | sed -nE 's/^(FAILED|ERROR) ([^ ]+).*/\2/p' | sort | uniq -c | sort -rn || true)
if [ -n "$ever" ]; then
    echo "tests that failed at least once (runs failed, test):"
    echo "$ever" | sed 's/^/  /'
fi
[ "$failed_runs" = 0 ]
