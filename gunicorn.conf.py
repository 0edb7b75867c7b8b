"""gunicorn's configuration for serving the service in production (`make serve`, and `make bench`).

gunicorn reads this file when started with `-c gunicorn.conf.py`. Every value can be changed from the environment
(the `GUNICORN_*` variables below, and `HOST`/`PORT`), so that one file serves this 2-core machine and bigger ones.

Sizing. Each worker is a process with its own interpreter (one core's worth of Python at most, because of the
GIL); its threads overlap the time requests spend waiting on PostgreSQL and Redis. The default is one worker per
core the process may run on and 4 threads each: on this machine 2 × 4. On a bigger machine keep workers at about
the number of cores (not the `2 × cores + 1` of synchronous workers: the threads already fill the I/O waits) and
raise threads only if the cores sit idle under load while requests queue. Every thread keeps its own database
connection open for CONN_MAX_AGE seconds, so workers × threads × machines must stay well below PostgreSQL's
`max_connections` (100 by default), or a pooler must stand in between.
"""

import os


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may use (taskset, cgroup cpusets)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# Where to listen. Behind a reverse proxy on the same host the loopback address is the right one; in a container
# set HOST=0.0.0.0. GUNICORN_BIND takes a full address (or several, comma-separated, e.g. unix:/run/ws.sock).
bind = os.environ.get("GUNICORN_BIND", f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}").split(
    ","
)

wsgi_app = "workspace.wsgi:application"
worker_class = "gthread"
workers = _int("GUNICORN_WORKERS", _cores())
# A chdb:// CLICKHOUSE_URL names a folder that one process only may open (embedded ClickHouse lives in the process
# that opens it): one worker, which syncs events in a thread (scripts/serve.sh), or a ClickHouse server.
if os.environ.get("CLICKHOUSE_URL", "").strip().lower().startswith("chdb:") and workers != 1:
    raise SystemExit(
        f"gunicorn: CLICKHOUSE_URL names a chDB folder, which one process only may open, and {workers} workers would "
        "each open it: set GUNICORN_WORKERS=1, or point CLICKHOUSE_URL at a ClickHouse server (http(s)://...)."
    )
threads = _int("GUNICORN_THREADS", 4)
# Connections a worker holds at once, idle kept-alive ones included (they wait in its poller, not in a thread).
worker_connections = _int("GUNICORN_WORKER_CONNECTIONS", 1000)

# Keep idle client connections open this many seconds. Set it longer than the idle timeout of the load balancer
# or proxy in front (60 s for most), so that the proxy closes idle connections, never gunicorn: a request sent
# down a connection gunicorn is closing at that moment fails with a 502 at the proxy.
keepalive = _int("GUNICORN_KEEPALIVE", 75)
# A worker that does not report for this long is killed and replaced. Requests end well before it: a database
# statement is cut at DATABASE_STATEMENT_TIMEOUT_MS (15 s) and a wait for its answer at 20 s (see settings).
timeout = _int("GUNICORN_TIMEOUT", 30)
# On a restart or a stop (SIGTERM), workers finish the requests they are serving for up to this long.
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)

# The workers' heartbeat files in memory: on a disk, a slow fsync elsewhere can stall a worker's heartbeat and get
# it killed as if it hung.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None

# Replace each worker after about this many requests (spread by the jitter, so that they are not all replaced at
# once): a slow leak in a library then costs nothing. 0 turns it off.
max_requests = _int("GUNICORN_MAX_REQUESTS", 10_000)
max_requests_jitter = _int("GUNICORN_MAX_REQUESTS_JITTER", 1_000)

# Load Django once in the master and fork the workers from it: they start faster, share the loaded code's memory,
# and an import error stops the start instead of looping workers. Django opens no database connection at import;
# post_fork below closes any that a hook opened all the same, since a connection must not be shared across forks.
preload_app = os.environ.get("GUNICORN_PRELOAD", "true").strip().lower() in {"1", "true", "yes", "on"}

# No access log by default: one line per request costs time and disk, and the proxy in front logs requests anyway.
# GUNICORN_ACCESS_LOG=- writes it to stdout, or give a file.
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'
errorlog = os.environ.get("GUNICORN_ERROR_LOG", "-")
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
proc_name = "workspace"

# The longest request line (method, URL, protocol) gunicorn reads, in bytes. Its default, 4,094, answered a signed
# embed's URL with gunicorn's own HTML 400 from about 4 KB of token; an embed's URL carries its token (up to 8,192
# characters, dashboards.public.embeds.MAX_TOKEN_LENGTH) and its viewer's range and format, which 16 KiB holds. gunicorn
# lowers any value of 8,190 or more to 8,190 (`MAX_REQUEST_LINE` in gunicorn.http.message), so that cap is raised to
# this value below. Longer lines still get gunicorn's 400 before any of the service's code runs; 0 reads any length.
limit_request_line = _int("GUNICORN_LIMIT_REQUEST_LINE", 16_384)


def _allow_request_line(limit: int) -> None:
    from gunicorn.http import message

    message.MAX_REQUEST_LINE = max(message.MAX_REQUEST_LINE, limit + 1)


_allow_request_line(limit_request_line)

# The addresses whose X-Forwarded-* headers gunicorn believes for the request's scheme (wsgi.url_scheme). Django
# reads X-Forwarded-Proto itself (SECURE_PROXY_SSL_HEADER, see README "Serve it in production").
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")


# Python's cyclic garbage collector. By default it runs after every 700 new container objects; a page of batch
# exports holds ~3,000 until it is rendered, so it would be walked several times per request. A worker collects
# after GUNICORN_GC_THRESHOLD new objects instead (0 keeps Python's default), and not many more: what a request
# leaves to the collector piles up until then, and one collection of 50,000 objects' worth took 50-90 ms, during
# which no thread of the worker runs (at 10,000: 3-8 ms). The objects the master loaded (Django, the app, its
# libraries) are frozen before each fork, so that collections in the workers skip them and leave their memory pages
# shared with the master. Django imports the URL configuration, and with it every view and serializer, on a
# process's first request; the master imports it before forking, so that it is among what is frozen and shared (a
# worker's collections otherwise walk its ~24,000 objects: 21 ms instead of 5.5 for the longest one in 2,000 requests
# of the bench's pages).
gc_threshold = _int("GUNICORN_GC_THRESHOLD", 10_000)


def pre_fork(server, worker):
    import gc
    import sys

    if "workspace.wsgi" in sys.modules:  # the app is the service's (not, say, benchmarks/floor.py)
        from django.urls import get_resolver

        get_resolver().url_patterns  # noqa: B018 - imports the URL configuration's modules
    gc.freeze()


def post_fork(server, worker):
    import gc
    import sys

    if gc_threshold > 0:
        gc.set_threshold(gc_threshold, *gc.get_threshold()[1:])

    if "django.db" in sys.modules:  # the app is Django (not, say, benchmarks/floor.py)
        from django.db import connections

        connections.close_all()
