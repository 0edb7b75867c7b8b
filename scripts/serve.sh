#!/usr/bin/env bash
# Serve the service in production: production settings, migrations, static files, then gunicorn with
# gunicorn.conf.py (workers, threads, address: see that file). `make serve` runs it; `make bench` starts its
# copy of the service through it too. Extra arguments go to gunicorn.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PY:-.venv/bin/python}"
export DEBUG=false
missing=()
[ -n "${SECRET_KEY:-}" ] || missing+=(SECRET_KEY)
[ -n "${ALLOWED_HOSTS:-}" ] || missing+=(ALLOWED_HOSTS)
if [ "${#missing[@]}" -ne 0 ]; then
  echo "serve: set ${missing[*]} in the environment (production settings: DEBUG is off), e.g." >&2
  echo "  SECRET_KEY=\"\$(openssl rand -base64 48)\" ALLOWED_HOSTS=api.example.com make serve" >&2
  echo "See README \"Serve it in production\"." >&2
  exit 2
fi

"$PY" manage.py migrate --noinput
"$PY" manage.py collectstatic --noinput --verbosity 0
# Events at scale: the ClickHouse tables. The events sync is a service of its own beside gunicorn (`manage.py
# sync_events`), except with a chDB folder, which one process only may open: then the one worker syncs in a thread,
# and runs the batch exports, which read the events there, in another (gunicorn.conf.py refuses more than one worker).
if [ -n "${CLICKHOUSE_URL:-}" ]; then
  "$PY" manage.py clickhouse_migrate
  case "$CLICKHOUSE_URL" in chdb:*) export EVENTS_SYNC_IN_SERVER=true BATCH_EXPORT_WORKER_IN_SERVER=true ;; esac
fi
exec "$PY" -m gunicorn -c gunicorn.conf.py "$@"
