#!/usr/bin/env bash
# `make run`: Temporal's development server (unless TEMPORAL_ADDRESS names a Temporal already running), one
# batch-export worker, the sender of invite mails (the requests only queue them), the events sync when CLICKHOUSE_URL
# is set, and the web server, on a migrated database with demo data. Ctrl-C, or any of them stopping, stops them all.
#
# HOST/PORT: the web server's address (SITE_URL follows it unless set). The development server listens on 127.0.0.1
# only, on TEMPORAL_PORT (gRPC, 7233), TEMPORAL_UI_PORT (web UI, +1000), TEMPORAL_HTTP_PORT (HTTP API, +10) and
# TEMPORAL_METRICS_PORT (Prometheus /metrics, +2000), each following TEMPORAL_PORT unless set; its history, matching
# and worker services take free ports of 127.0.0.1 that `temporal server start-dev` picks (it has no option for
# them). Its web UI fetches no news feed. Its database is data/temporal.sqlite3 and its log data/temporal.log.
#
# seed_demo prints where to start: admin, the API docs, the demo dashboard's shared page, a signed embed of it for the
# demo shop's Chrome visitors (with the `manage.py embed_url` command that made it) and the demo API key.
#
# What comes first is the web server's first answer: one process migrates and seeds (the service's start-up and its
# system checks, once), the web server skips the checks just run on the same code and its autoreloader imports
# nothing (`serve`), and the worker, the invite sender and the events sync start once it answers, so that their
# start-up takes no CPU from it. Each step says how long it took ("step: migrate and seed_demo took 4.2 s"), and the
# last one how long since `make run` began (MAKE_RUN_STARTED, which the Makefile sets; else since this script began).
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_NUMERIC=C

# now: the time in seconds (to the microsecond with bash 5); took WHAT SINCE: says how long WHAT took.
now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
took() { awk -v what="$1" -v since="$2" -v now="$(now)" 'BEGIN { printf "step: %s took %.1f s\n", what, now - since }'; }
STARTED=${MAKE_RUN_STARTED:-$(now)}

PY=${PY:-.venv/bin/python}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
export SITE_URL=${SITE_URL:-http://$HOST:$PORT}
TEMPORAL_PORT=${TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${TEMPORAL_UI_PORT:-$((TEMPORAL_PORT + 1000))}
TEMPORAL_HTTP_PORT=${TEMPORAL_HTTP_PORT:-$((TEMPORAL_PORT + 10))}
TEMPORAL_METRICS_PORT=${TEMPORAL_METRICS_PORT:-$((TEMPORAL_PORT + 2000))}
# Local destinations (a PostgreSQL on 127.0.0.1, a local S3) are fine in development.
export BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS=${BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS:-true}

pids=()
# Commands started with & in a script ignore SIGINT, so Ctrl-C reaches them as a SIGTERM from here: each one's
# children first (the web server runs in the child of a loop, `serve`), then the process itself.
stop() {
    trap - INT TERM EXIT
    for pid in "${pids[@]}"; do
        pkill -TERM -P "$pid" 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
    done
    wait || true
}
trap stop INT TERM EXIT

temporal_started=
if [ -z "${TEMPORAL_ADDRESS:-}" ]; then
    temporal="$(dirname "$PY")/temporal"
    mkdir -p data
    temporal_started=$(now)
    "$temporal" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT" \
        --http-port "$TEMPORAL_HTTP_PORT" --metrics-port "$TEMPORAL_METRICS_PORT" --ui-disable-news-fetch \
        --db-filename data/temporal.sqlite3 --log-level warn >>data/temporal.log 2>&1 &
    pids+=($!)
    export TEMPORAL_ADDRESS=127.0.0.1:$TEMPORAL_PORT
    export TEMPORAL_UI_URL=${TEMPORAL_UI_URL:-http://127.0.0.1:$TEMPORAL_UI_PORT}
fi

if [ -n "$temporal_started" ]; then
    for attempt in $(seq 1 150); do
        if "$temporal" operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; then
            break
        fi
        if ! kill -0 "${pids[0]}" 2>/dev/null || [ "$attempt" = 150 ]; then
            ports="$TEMPORAL_PORT, $TEMPORAL_UI_PORT, $TEMPORAL_HTTP_PORT, $TEMPORAL_METRICS_PORT"
            echo "Temporal's development server did not start (ports $ports free?):" >&2
            tail -n 20 data/temporal.log >&2
            exit 1
        fi
        sleep 0.2
    done
    took "Temporal's development server's start" "$temporal_started"
fi

# The demo data waits for Temporal: its batch export gets a schedule there. Migrating in the same process starts the
# service (and runs its system checks) once instead of twice.
step=$(now)
"$PY" manage.py seed_demo --migrate
took "migrate and seed_demo" "$step"

# Events at scale (CLICKHOUSE_URL): the ClickHouse tables, then the events sync. A chDB folder opens in one process
# only, so with a chdb:// URL the web server syncs in a thread of its own (EVENTS_SYNC_IN_SERVER); with a server's URL
# `manage.py sync_events` runs beside it, started with the worker below.
if [ -n "${CLICKHOUSE_URL:-}" ]; then
    step=$(now)
    "$PY" manage.py clickhouse_migrate
    took "clickhouse_migrate" "$step"
    # The runs read the events where they are: with a chDB folder the web server also runs the batch-export worker in
    # a thread of its own (BATCH_EXPORT_WORKER_IN_SERVER).
    case "$CLICKHOUSE_URL" in chdb:*) export EVENTS_SYNC_IN_SERVER=true BATCH_EXPORT_WORKER_IN_SERVER=true ;; esac
fi

# runserver's autoreloader is a parent process that imports the whole service only to start a child that imports it
# again and serves, and to start the child again when it exits with status 3 after a change to the code. This loop is
# that parent without the import: the child is runserver with RUN_MAIN=true (Django's django.utils.autoreload).
serve() {
    local status=3
    while [ "$status" = 3 ]; do
        status=0
        RUN_MAIN=true "$PY" manage.py runserver --skip-checks "$HOST:$PORT" || status=$?
    done
    return "$status"
}
step=$(now)
serve &
web=$!
pids+=("$web")
# answers: whether the web server answers a request (GET /healthz, which touches nothing but loads the URLs, as any
# first request does), by bash's own /dev/tcp: no client needed.
address=$HOST
case "$address" in 0.0.0.0 | "::" | "[::]") address=127.0.0.1 ;; esac
address=${address#[}
address=${address%]}
answers() {
    local status=""
    exec 3<>"/dev/tcp/$address/$PORT" || return 1
    printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$address" >&3
    IFS= read -r -t 120 status <&3 || true
    exec 3<&- 3>&-
    [[ "$status" == HTTP/* ]]
}
until answers 2>/dev/null; do
    if ! kill -0 "$web" 2>/dev/null; then
        exit 1
    fi
    sleep 0.1
done
took "the web server's start, to its first answer" "$step"
took "everything until the first answer" "$STARTED"

case "${CLICKHOUSE_URL:-}" in
    "" | chdb:*) ;;
    *)
        "$PY" manage.py sync_events &
        pids+=($!)
        ;;
esac
if [ "${BATCH_EXPORT_WORKER_IN_SERVER:-}" != "true" ]; then
    "$PY" manage.py batch_export_worker &
    pids+=($!)
fi
# Every invite mail goes out from here, never from a request: within seconds of the invite.
"$PY" manage.py send_pending_invites --every 5 &
pids+=($!)
wait -n
