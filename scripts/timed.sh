#!/usr/bin/env bash
# timed.sh WHAT COMMAND...: runs COMMAND, then says how long WHAT took ("step: WHAT took 3.1 s"), and exits with its
# status. The Makefile's install steps use it, so that `make run`'s log says how long each of its steps took (the
# rest is scripts/run.sh's).
set -u
export LC_NUMERIC=C
what=$1
shift
started=${EPOCHREALTIME:-$(date +%s)}
status=0
"$@" || status=$?
awk -v what="$what" -v since="$started" -v now="${EPOCHREALTIME:-$(date +%s)}" \
    'BEGIN { printf "step: %s took %.1f s\n", what, now - since }'
exit "$status"
