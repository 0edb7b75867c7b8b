#!/usr/bin/env bash
# The test suite on a busy machine: `make test`, or the command given, with busy loops taking the cores
# beside it, as on a loaded 2-core CI runner. The loops are killed when it ends, fails or is interrupted; the exit
# status is the command's.
#
#   scripts/busy-test.sh                                   # make test beside two busy loops
#   scripts/busy-test.sh make bench BENCH_ARGS="--scale 0.1 --duration 3"
#   BURNERS=4 scripts/busy-test.sh .venv/bin/python -m pytest tests/organizations/test_slow_servers_live.py
set -uo pipefail
cd "$(dirname "$0")/.."

BURNERS=${BURNERS:-2}
[ "$#" -gt 0 ] || set -- make test

burners=()
stop_burners() {
    for pid in "${burners[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait "${burners[@]}" 2>/dev/null || true
    burners=()
}
trap stop_burners EXIT
trap 'stop_burners; exit 130' INT
trap 'stop_burners; exit 143' TERM

for _ in $(seq 1 "$BURNERS"); do
    # A subshell spinning on a builtin: one core's worth of load, and one process to kill.
    ( trap - INT TERM; while :; do :; done ) &
    burners+=("$!")
done
echo "busy-test: $BURNERS busy loop(s) (pids ${burners[*]}) beside: $*"

started=$(date +%s)
"$@"
status=$?
elapsed=$(( $(date +%s) - started ))
read -r load1 load5 load15 _ < /proc/loadavg
stop_burners
echo "busy-test: exit status $status after ${elapsed} s; load average at the end $load1 $load5 $load15"
exit "$status"
