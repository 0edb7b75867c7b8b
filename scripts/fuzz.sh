#!/usr/bin/env bash
# Fuzz a throwaway copy of the service against its own OpenAPI schema with Schemathesis.
# A fresh database, the demo data, gunicorn on a free port, then every operation through the examples, coverage,
# fuzzing and stateful phases with every check.
# The database is a SQLite file in a temporary folder, or with FUZZ_DATABASE_URL=postgres://.../workspace_fuzz a
# PostgreSQL database that is dropped and recreated (its name must contain "fuzz"): only PostgreSQL has the row
# locks and transaction rules of production, so CI fuzzes there.
# Reproducible: a fixed seed (FUZZ_SEED) and a bounded number of examples (FUZZ_MAX_EXAMPLES). FUZZ_CONFIG names the
# Schemathesis settings (default schemathesis.toml).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
WORKDIR="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORKDIR"
}
trap cleanup EXIT

if [ -n "${FUZZ_DATABASE_URL:-}" ]; then
  export DATABASE_URL="$FUZZ_DATABASE_URL"
  "$PY" - <<'PYTHON'
import os
import sys
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

parts = urlsplit(os.environ["DATABASE_URL"])
name = parts.path.lstrip("/")
if parts.scheme not in ("postgres", "postgresql") or "fuzz" not in name:
    sys.exit(f"fuzz: FUZZ_DATABASE_URL must name a PostgreSQL database whose name contains 'fuzz', not {name!r}")
with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as connection:
    connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
PYTHON
else
  export DATABASE_URL="sqlite:///$WORKDIR/fuzz.sqlite3"
fi
# The demo key file and anything else the service keeps on disk stay in the throwaway folder.
export DATA_DIR="$WORKDIR"
unset REDIS_URL
export DEBUG=false
export SECRET_KEY="fuzz-$(head -c 48 /dev/urandom | base64 | tr -d '/+=\n')"
export ALLOWED_HOSTS=127.0.0.1 SECURE_SSL_REDIRECT=false SESSION_COOKIE_SECURE=false
# The fuzzer sends thousands of requests with one key and many without: no throttling here.
export API_RATE_LIMIT_BURST=1000000/minute API_RATE_LIMIT_SUSTAINED=1000000/hour API_AUTH_FAILURE_RATE=1000000/minute

"$PY" manage.py migrate --noinput >/dev/null
# The key is the last line of seed_demo's output that looks like one.
KEY="$("$PY" manage.py seed_demo | grep -E '^[A-Za-z]+_[A-Za-z0-9_]{20,}$' | tail -n 1)"
if [ -z "$KEY" ]; then echo "fuzz: seed_demo printed no API key" >&2; exit 1; fi

PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# The fuzzer checks the application, so gunicorn's own HTML 400 for a request line over 16 KiB (a query string
# with a parameter repeated hundreds of times) is turned off here: such requests reach the application.
.venv/bin/gunicorn workspace.wsgi:application --bind "127.0.0.1:$PORT" --workers 2 --timeout 60 \
  --limit-request-line 0 --log-level warning >"$WORKDIR/gunicorn.log" 2>&1 &
SERVER_PID=$!

status=0
.venv/bin/schemathesis --config-file "${FUZZ_CONFIG:-schemathesis.toml}" run "http://127.0.0.1:$PORT/api/schema/" \
  --wait-for-schema 120 \
  --header "Authorization: Bearer $KEY" \
  --phases examples,coverage,fuzzing,stateful \
  --checks all \
  --max-examples "${FUZZ_MAX_EXAMPLES:-25}" \
  --seed "${FUZZ_SEED:-20261121}" \
  --workers 1 \
  --request-timeout 20 \
  --suppress-health-check too_slow,filter_too_much \
  "$@" || status=$?

if [ "$status" -ne 0 ]; then
  echo "== gunicorn log (last 50 lines) ==" >&2
  tail -n 50 "$WORKDIR/gunicorn.log" >&2
fi
exit "$status"
