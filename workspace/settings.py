"""Settings, read from the environment so one codebase runs in development, tests and production.

Every value has a development default; production sets `DEBUG=false`, `SECRET_KEY`, `ALLOWED_HOSTS`
and `DATABASE_URL` (see README "Configuration").
"""

import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("DATA_DIR", BASE_DIR / "data"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", True)

_DEV_SECRET_KEY = "dev-only-insecure-secret-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY", _DEV_SECRET_KEY if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured("Set the SECRET_KEY environment variable when DEBUG is off.")

# Fernet keys that encrypt batch-export destination secrets at rest (pipelines.batch_exports.secrets), comma-separated,
# newest first: the first encrypts, each decrypts. Empty: one key derived from SECRET_KEY. To replace a key, put the
# new one first, run `manage.py rotate_secrets`, then drop the old one.
SECRETS_ENCRYPTION_KEYS = env_list("SECRETS_ENCRYPTION_KEYS", [])

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # The OAuth 2.1 authorization server (apikeys/oauth/); its tables are applications, codes and tokens.
    "oauth2_provider",
    "workspace",
    "organizations",
    "apikeys",
    "dashboards",
    "pipelines",
]

MIDDLEWARE = [
    "workspace.api.middleware.HeadMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Preflights and CORS headers of /mcp and its metadata for browser MCP clients, before anything answers.
    "workspace.mcp.cors.McpCorsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "workspace.api.middleware.ContentSecurityPolicyMiddleware",
    "workspace.api.middleware.APIRequestSizeMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "workspace.api.idempotency.IdempotencyMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "workspace.api.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "workspace.urls"
WSGI_APPLICATION = "workspace.wsgi.application"
ASGI_APPLICATION = "workspace.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database: DATABASE_URL, or a SQLite file in the git-ignored data folder.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'db.sqlite3'}",
        conn_max_age=env_int("CONN_MAX_AGE", 60),
        # No `SELECT 1` before each request's first query: workspace/db.py closes a kept connection the server has
        # hung up on by looking at its socket, without a round trip.
        conn_health_checks=False,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite keeps connections per thread; a long-lived connection buys nothing there.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Writers take the lock when their transaction starts and wait for each other instead of failing with
    # "database is locked"; WAL lets readers go on while one process writes.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # The test database is a file, so that a copy of the service in another process can share it.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
    DATA_DIR.mkdir(parents=True, exist_ok=True)
else:
    # Django's PostgreSQL backend with psycopg's C loader for date-times (workspace/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "workspace.postgresql"
    # A database that is down or stuck must cost a request a bounded time, then a 503 (workspace/api/exceptions.py),
    # never a hang: libpq gives up connecting after DATABASE_CONNECT_TIMEOUT seconds (2 at least), the server ends
    # statements after DATABASE_STATEMENT_TIMEOUT_MS, keepalives notice a peer that vanished while a connection was
    # idle, and workspace/db.py ends a wait for an answer that never comes after DATABASE_RESPONSE_TIMEOUT_MS.
    DATABASE_STATEMENT_TIMEOUT_MS = env_int("DATABASE_STATEMENT_TIMEOUT_MS", 15_000)
    # 0 turns either off: a long migration may need `DATABASE_STATEMENT_TIMEOUT_MS=0`, which turns off both.
    DATABASE_RESPONSE_TIMEOUT_MS = env_int(
        "DATABASE_RESPONSE_TIMEOUT_MS", DATABASE_STATEMENT_TIMEOUT_MS + 5_000 if DATABASE_STATEMENT_TIMEOUT_MS else 0
    )
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options.setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 5))
    _options.setdefault("keepalives", 1)
    _options.setdefault("keepalives_idle", 30)
    _options.setdefault("keepalives_interval", 10)
    _options.setdefault("keepalives_count", 3)
    # JIT compilation pays off for long analytical queries, never for the API's short indexed ones, where compiling
    # a plan's expressions costs many times what running the query does.
    # PostgreSQL's default cost of a random page read (4, for spinning disks) makes a page's 100 lookups by id look
    # dearer than reading the whole table: on SSDs, or a working set in memory, 1.1 is the usual setting, and the
    # list pages then join their ids through the primary key instead of scanning every row.
    DATABASE_RANDOM_PAGE_COST = env_float("DATABASE_RANDOM_PAGE_COST", 1.1)
    # Behind PgBouncer (DATABASE_POOLER=session or transaction) the settings above are not sent as startup options,
    # which PgBouncer refuses: they are set on the database role instead (README, "Connection poolers"). In
    # transaction mode each transaction, and each statement outside one, may run on another server connection, shared
    # with other processes, so nothing may outlive a transaction: no statement is prepared (psycopg's
    # `prepare_threshold` None; workspace.db.prepared_cursor prepares nothing either) and no server-side cursor is
    # opened (Django holds them across transactions). Django's `SET TIME ZONE`, sent only when the server's zone is
    # not UTC, is safe: PgBouncer keeps the time zone per client. Connections to the pooler are kept (CONN_MAX_AGE)
    # and checked (workspace.db.drop_dead_connections) as any others.
    DATABASE_POOLER = os.environ.get("DATABASE_POOLER", "").strip().lower() or "none"
    if DATABASE_POOLER not in ("none", "session", "transaction"):
        raise ImproperlyConfigured(f"DATABASE_POOLER must be none, session or transaction, not {DATABASE_POOLER!r}.")
    if DATABASE_POOLER == "none":
        _options["options"] = (
            f"{_options.get('options', '')} -c statement_timeout={DATABASE_STATEMENT_TIMEOUT_MS} -c jit=off"
            f" -c random_page_cost={DATABASE_RANDOM_PAGE_COST}"
        ).strip()
    if DATABASE_POOLER == "transaction":
        _options["prepare_threshold"] = None
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True

# `manage.py runserver` serves every request in a thread of its own, and a connection kept open for reuse would
# outlive its thread: one leaked connection per request until the database refuses more. The development server
# therefore closes connections at the end of each request; production servers (gunicorn) keep theirs.
if sys.argv[1:2] == ["runserver"]:
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "workspace.User"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files (the admin's, Swagger UI's and Redoc's) are served by the application itself through WhiteNoise, so
# they work under gunicorn with DEBUG off, where Django serves none. In production `manage.py collectstatic` gathers
# them into STATIC_ROOT with hashed, compressed copies that are cached for a year; in development they are read
# from the installed apps as they are.
STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

# Shared cache: Redis when REDIS_URL is set (rate-limit counters then hold across processes),
# otherwise a per-process memory cache. Redis fails open (workspace/cache.py): while it is unreachable or hung,
# requests are still served and counted per process; the short socket timeouts bound what a request can lose to it.
REDIS_URL = os.environ.get("REDIS_URL", "")
REDIS_SOCKET_TIMEOUT = float(os.environ.get("REDIS_SOCKET_TIMEOUT", "0.25"))
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "workspace.cache.FailOpenRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "workspace"),
            "RETRY_INTERVAL": float(os.environ.get("REDIS_RETRY_INTERVAL", "5")),
            "OPTIONS": {"socket_connect_timeout": REDIS_SOCKET_TIMEOUT, "socket_timeout": REDIS_SOCKET_TIMEOUT},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# How long the answer to a POST with an Idempotency-Key is replayed. The records live in the database
# (workspace/api/idempotency.py); `manage.py purge_idempotency_records` deletes expired ones.
IDEMPOTENCY_TTL_SECONDS = 24 * 3600


# Content-Security-Policy (workspace/api/middleware.py), for a response that sets none itself. API responses are
# data: they load nothing and are framed nowhere. HTML pages (admin, landing page, the docs) load only from the
# service; inline styles are allowed because the admin and Redoc have some. The docs serve Swagger UI and Redoc from
# the service's own static files (drf-spectacular-sidecar), and Redoc runs its search in a worker made from a blob.
def _policy(**directives: str) -> str:
    return "; ".join(f"{name.replace('_', '-')} {value}" for name, value in directives.items())


_HTML_POLICY = {
    "default_src": "'self'",
    "script_src": "'self'",
    "style_src": "'self' 'unsafe-inline'",
    "img_src": "'self' data:",
    "object_src": "'none'",
    "base_uri": "'none'",
    "form_action": "'self'",
    "frame_ancestors": "'none'",
}
CONTENT_SECURITY_POLICY_API = _policy(default_src="'none'", frame_ancestors="'none'")
CONTENT_SECURITY_POLICY_HTML = _policy(**_HTML_POLICY)
CONTENT_SECURITY_POLICY_DOCS = _policy(**_HTML_POLICY, worker_src="'self' blob:")

# Request bodies above this size are refused with 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BODY_BYTES", 1024 * 1024)

# Events in (DECISIONS.md §13): the capture endpoints refuse bodies larger than this after decompression (413).
CAPTURE_MAX_BODY_BYTES = env_int("CAPTURE_MAX_BODY_BYTES", 20_000_000)
# Monthly partitions of the events table (PostgreSQL) are created for this many months ahead of the current one,
# and on demand for months up to this many months back; other months' events go to the default partition.
EVENT_PARTITION_MONTHS_AHEAD = env_int("EVENT_PARTITION_MONTHS_AHEAD", 3)
EVENT_PARTITION_MONTHS_BEHIND = env_int("EVENT_PARTITION_MONTHS_BEHIND", 24)

# Batch export destinations (HTTP url, Postgres/Redshift host, S3 endpoint_url) that resolve to loopback, private,
# link-local, reserved or cloud-metadata addresses are refused at run time unless this is on (development, tests).
BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = env_bool("BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS", False)

# Email: console backend in development; SMTP when EMAIL_HOST is set.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", 587)
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
    EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
    EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
else:
    EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "workspace@localhost")
# Used to build absolute links in emails (invite acceptance).
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000")

# How long one computation of the query layer may take, all its statements together (pipelines/query/limits.py); past
# it the API answers 400 `query_timeout` and nothing of it keeps running.
QUERY_TIMEOUT_MS = env_int("QUERY_TIMEOUT_MS", 10_000)
# Threads of each process that run computations a client asked to go on without it (`Prefer: respond-async`): past
# them, such computations wait their turn (each still within the per-key and per-project limits below).
QUERY_ASYNC_THREADS = env_int("QUERY_ASYNC_THREADS", 4)
# Computations running at once per API key and per project; past either the API answers 429 with Retry-After.
API_QUERY_CONCURRENCY = env_int("API_QUERY_CONCURRENCY", 3)
PROJECT_QUERY_CONCURRENCY = env_int("PROJECT_QUERY_CONCURRENCY", 6)
# Database time each API key's computations may take per minute; past it the API answers 429 until the minute ends.
API_QUERY_BUDGET_MS = env_int("API_QUERY_BUDGET_MS", 60_000)
# The largest answer a query computes: a HogQL result past this many bytes is refused, not held.
QUERY_MAX_RESULT_BYTES = env_int("QUERY_MAX_RESULT_BYTES", 20_000_000)
# The results of one API response together (a dashboard's tiles, a page of insights with results): past it, the rest
# are left out, each saying `result_too_large`.
DASHBOARD_MAX_RESULT_BYTES = env_int("DASHBOARD_MAX_RESULT_BYTES", 50_000_000)
# The memory one statement of the query layer may use on ClickHouse (its `max_memory_usage`); past it the API answers
# 400 `memory_limit` naming this setting.
CLICKHOUSE_MAX_MEMORY_BYTES = env_int("CLICKHOUSE_MAX_MEMORY_BYTES", 4_000_000_000)
# A shared page's tile is computed at most once per this many seconds per effective query, however many people look
# (dashboards/results.py); meanwhile they all see the same result.
SHARED_PAGE_REFRESH_SECONDS = env_int("SHARED_PAGE_REFRESH_SECONDS", 300)
# How long a view of a public page waits for computations other requests run (all its tiles together) before it shows
# the last result marked stale, or says the tile is being computed: anonymous viewers never hold the service's threads
# for a computation's whole length. At most 10 seconds.
SHARED_PAGE_WAIT_SECONDS = min(max(env_float("SHARED_PAGE_WAIT_SECONDS", 2.0), 0.0), 10.0)
# How many threads of one process public pages' computations and waits may hold before views stop waiting (they then
# show the last result, or that it is being computed, at once); keep it below the process's threads. 0: none waits.
SHARED_PAGE_WAITING_VIEWS = max(env_int("SHARED_PAGE_WAITING_VIEWS", 2), 0)
# The largest public page (a shared dashboard's HTML or JSON, an embed's): a tile whose result would take it past this
# many bytes is left out, saying why, as it is written, so no worker ever holds a larger one.
SHARED_PAGE_MAX_BYTES = max(env_int("SHARED_PAGE_MAX_BYTES", 5_000_000), 10_000)

# Organization invites expire after this many days.
INVITE_EXPIRY_DAYS = env_int("INVITE_EXPIRY_DAYS", 3)
# An invite whose mail failed, or was cut short, is mailed again by `manage.py send_pending_invites` this many seconds
# later, twice as long after each further attempt (an hour at most), until the invite expires.
INVITE_EMAIL_RETRY_SECONDS = env_int("INVITE_EMAIL_RETRY_SECONDS", 60)
# An attempt to mail an invite holds it for this many seconds (a lease): no other sender takes it meanwhile, so a mail
# server that acknowledges late still gets it once, and the attempt is cut off before the lease ends. Keep it well
# above EMAIL_TIMEOUT, which bounds each of the dozen steps of an attempt, not their sum.
INVITE_EMAIL_LEASE_SECONDS = env_int("INVITE_EMAIL_LEASE_SECONDS", 120)

# Domain verification: TXT records at "<prefix>.<domain>".
DOMAIN_VERIFICATION_PREFIX = os.environ.get("DOMAIN_VERIFICATION_PREFIX", "_workspace-challenge")
DOMAIN_VERIFICATION_NAMESERVERS = env_list("DOMAIN_VERIFICATION_NAMESERVERS", [])  # empty: the system resolver
DOMAIN_VERIFICATION_PORT = env_int("DOMAIN_VERIFICATION_PORT", 53)
DOMAIN_VERIFICATION_TIMEOUT = float(os.environ.get("DOMAIN_VERIFICATION_TIMEOUT", "5"))

# Plugin catalogue: a bundled JSON file, or a URL serving the same document.
PLUGIN_CATALOGUE_URL = os.environ.get("PLUGIN_CATALOGUE_URL", "")

# Batch exports run on Temporal (DECISIONS.md §14). Unset TEMPORAL_ADDRESS: no schedules, exports are recorded only
# (and /readyz says "unconfigured"); set, /readyz checks that it accepts TCP connections.
TEMPORAL_ADDRESS = os.environ.get("TEMPORAL_ADDRESS", "")
TEMPORAL_NAMESPACE = os.environ.get("TEMPORAL_NAMESPACE", "default")
# How long a write of the API waits for Temporal after it commits (a schedule update, a workflow start) before it
# answers anyway: the write is stored, and `sync_batch_export_schedules` brings Temporal in step within a minute.
TEMPORAL_REQUEST_TIMEOUT = env_float("TEMPORAL_REQUEST_TIMEOUT", 1.0)
TEMPORAL_TASK_QUEUE = os.environ.get("TEMPORAL_TASK_QUEUE", "batch-exports")
# The Temporal web UI, linked from admin (schedules and workflows); empty: no links.
TEMPORAL_UI_URL = os.environ.get("TEMPORAL_UI_URL", "").rstrip("/")
# Runs of one backfill executed at the same time.
BATCH_EXPORT_BACKFILL_CONCURRENCY = max(1, env_int("BATCH_EXPORT_BACKFILL_CONCURRENCY", 4))
# Activities (database reads and destination writes) one worker process runs at the same time.
BATCH_EXPORT_WORKER_ACTIVITIES = max(1, env_int("BATCH_EXPORT_WORKER_ACTIVITIES", 8))
# An export pauses itself after this many failed runs in a row (DECISIONS.md §17; pipelines.batch_exports.services).
BATCH_EXPORT_AUTO_PAUSE_AFTER = max(1, env_int("BATCH_EXPORT_AUTO_PAUSE_AFTER", 5))

# Events at scale in ClickHouse (DECISIONS.md §20, docs/clickhouse.md). Unset: events stay in this service's database
# only, and nothing of ClickHouse is loaded. `http(s)://user:password@host:port/database` (clickhouse-connect's options
# as query parameters, e.g. `?connect_timeout=2`): a ClickHouse server or cluster. `chdb:///absolute/folder`: embedded
# ClickHouse (chDB, `pip install 'analytics-workspace[chdb]'`), which one process only may open: the server's
# (EVENTS_SYNC_IN_SERVER). Only `pipelines.clickhouse.client` reads it; it connects when events are first synced.
CLICKHOUSE_URL = os.environ.get("CLICKHOUSE_URL", "").strip()
# The events sync (`manage.py sync_events`, pipelines.clickhouse.sync) copies what the service took in to ClickHouse:
# a batch as soon as this many rows wait, else what there is every EVENTS_SYNC_SECONDS.
EVENTS_SYNC_SECONDS = env_float("EVENTS_SYNC_SECONDS", 1.0)
EVENTS_SYNC_BATCH_SIZE = max(1, env_int("EVENTS_SYNC_BATCH_SIZE", 100_000))
# What /readyz checks beside the database, the cache and Temporal (workspace.health): name -> a function of an app.
READINESS_CHECKS = {"clickhouse": "pipelines.clickhouse.health.readiness"}
# Run the sync in a thread of the server process, started by its first request: what a chdb:// folder needs, since no
# other process may open it (scripts/run.sh and scripts/serve.sh set it for such a URL).
EVENTS_SYNC_IN_SERVER = env_bool("EVENTS_SYNC_IN_SERVER", False)
# Run a batch-export worker in a thread of the server process, started by its first request: with a chdb:// URL the
# runs read the events from a folder no other process may open (scripts/run.sh and scripts/serve.sh set it then).
BATCH_EXPORT_WORKER_IN_SERVER = env_bool("BATCH_EXPORT_WORKER_IN_SERVER", False)
# With CLICKHOUSE_URL set, the month partitions of events (PostgreSQL) that lie wholly this many days back and are
# wholly in ClickHouse are dropped by the sync, so that this database stops growing with the events.
EVENTS_DATABASE_RETENTION_DAYS = max(0, env_int("EVENTS_DATABASE_RETENTION_DAYS", 7))

# Personal API keys.
API_KEY_PREFIX = "phx_"
API_KEY_LAST_USED_INTERVAL_SECONDS = 3600
# Projects' secret keys (DECISIONS.md §21): their prefix, and how long a roll may keep the previous secret valid.
PROJECT_KEY_PREFIX = "phs_"
PROJECT_KEY_MAX_OVERLAP_SECONDS = 86400
# Where `manage.py seed_demo` keeps the demo key, so that each `make run` reuses it while it is valid.
DEMO_KEY_FILE = Path(os.environ.get("DEMO_KEY_FILE", DATA_DIR / "demo-key"))

# The OAuth 2.1 authorization server (DECISIONS.md §22, apikeys/oauth/, django-oauth-toolkit): authorization code with
# PKCE S256 only, public clients registered dynamically (RFC 7591) or by client ID metadata document, access tokens for
# an hour, refresh tokens rotated and a reused one revoking its family, tokens stored as digests only.
OAUTH_ACCESS_TOKEN_SECONDS = env_int("OAUTH_ACCESS_TOKEN_SECONDS", 3600)
OAUTH_REFRESH_TOKEN_SECONDS = env_int("OAUTH_REFRESH_TOKEN_SECONDS", 30 * 24 * 3600)
# Client ID metadata documents on loopback or private addresses (development and tests; never in production).
OAUTH_CLIENT_METADATA_ALLOW_PRIVATE = env_bool("OAUTH_CLIENT_METADATA_ALLOW_PRIVATE", False)
# Browser pages that may call /mcp besides the site's own (workspace/mcp/cors.py; the OAuth endpoints answer any page):
# origins such as a hosted MCP client's; and pages on a loopback host (the MCP Inspector on localhost), by default only
# in development. Any other Origin is refused at /mcp.
MCP_ALLOWED_ORIGINS = env_list("MCP_ALLOWED_ORIGINS", [])
MCP_ALLOW_LOOPBACK_ORIGINS = env_bool("MCP_ALLOW_LOOPBACK_ORIGINS", DEBUG)
OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "apikeys.oauth.validators.WorkspaceOAuth2Validator",
    # Personal keys' scopes (apikeys/scopes.py); a client that asks for none is offered the read scopes.
    "SCOPES_BACKEND_CLASS": "apikeys.oauth.validators.KeyScopes",
    "ACCESS_TOKEN_EXPIRE_SECONDS": OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": OAUTH_REFRESH_TOKEN_SECONDS,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ACCESS_TOKEN_GENERATOR": "apikeys.oauth.services.generate_access_token",
    "REFRESH_TOKEN_GENERATOR": "apikeys.oauth.services.generate_refresh_token",
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "PKCE_REQUIRED": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    # Native clients listen on the loopback interface on a port of the moment (RFC 8252 §7.3).
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none"],
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "apikeys.oauth.fetchers.ClientMetadataFetcher",
    "APPLICATION_ADMIN_CLASS": "apikeys.oauth.admin.ApplicationAdmin",
    "ACCESS_TOKEN_ADMIN_CLASS": "apikeys.oauth.admin.AccessTokenAdmin",
    "REFRESH_TOKEN_ADMIN_CLASS": "apikeys.oauth.admin.RefreshTokenAdmin",
    "GRANT_ADMIN_CLASS": "apikeys.oauth.admin.GrantAdmin",
    "ID_TOKEN_ADMIN_CLASS": "apikeys.oauth.admin.IDTokenAdmin",
}
# The toolkit's own models, named as Django's swappable settings so that migrations referring to them resolve.
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"
# The toolkit warns that redirect URIs may use plain http: only to the loopback interface here (a native app's local
# listener, RFC 8252), which every authorization request is checked for (apikeys/oauth/validators.py).
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
# Where the consent page sends a person who is not signed in.
LOGIN_URL = "/accounts/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First: it claims only OAuth access tokens (`pha_`), and the personal key class refuses any other bearer.
        "apikeys.oauth.authentication.OAuthAccessTokenAuthentication",
        "apikeys.authentication.ProjectSecretKeyAuthentication",
        "apikeys.authentication.PersonalAPIKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "apikeys.permissions.APIScopePermission",
    ],
    "DEFAULT_PARSER_CLASSES": ["workspace.api.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["workspace.api.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "workspace.api.pagination.LimitOffsetPagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": [
        "workspace.api.throttling.BurstRateThrottle",
        "workspace.api.throttling.SustainedRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "burst": os.environ.get("API_RATE_LIMIT_BURST", "480/minute"),
        "sustained": os.environ.get("API_RATE_LIMIT_SUSTAINED", "4800/hour"),
        # Failed authentications per client address (apikeys/authentication.py).
        "auth_failure": os.environ.get("API_AUTH_FAILURE_RATE", "60/minute"),
        # Wrong passwords for protected shared dashboard pages per client address (dashboards/pages.py).
        "shared_page_unlock": os.environ.get("SHARED_PAGE_UNLOCK_RATE", "10/minute"),
        # Views of shared dashboard pages per client address (dashboards/pages.py).
        "shared_page_view": os.environ.get("SHARED_PAGE_VIEW_RATE", "120/minute"),
        # OAuth client registrations per client address (apikeys/oauth/views.py); registration is open.
        "oauth_registration": os.environ.get("OAUTH_REGISTRATION_RATE", "20/hour"),
        # Query computations per key (pipelines/query/views.py); answers from the cache are not counted.
        "query": os.environ.get("API_QUERY_RATE", "120/minute"),
    },
    # The client address is the connecting one unless reverse proxies in front set X-Forwarded-For: with none
    # trusted, a client cannot pick its own address to dodge the per-address limits.
    "NUM_PROXIES": env_int("NUM_PROXIES", 0),
    "EXCEPTION_HANDLER": "workspace.api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "workspace.api.schema.ScopedAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Analytics Workspace Management API",
    "DESCRIPTION": (
        "Configuration of an analytics workspace: organizations, projects, members, invites, domains, "
        "dashboards, batch exports and pipeline plugins. Authenticate with `Authorization: Bearer <key>`; "
        "each operation names the scope it needs."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc come with the service (drf-spectacular-sidecar), so the docs need no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No badge fetched from the public validator: the page talks to this service only.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/",
    # One scheme per operation, the reference's: the session that admin's operators browse the API with is not
    # part of the contract (it stays accepted, like any other request of a logged-in operator).
    "AUTHENTICATION_WHITELIST": ["apikeys.authentication.PersonalAPIKeyAuthentication"],
    # /api/environments/ is an alias of /api/projects/ (workspace/urls.py): described once.
    "PREPROCESSING_HOOKS": ["workspace.urls.schema_without_aliases"],
    # A component is described by its own serializer's docstring, never by a base class's.
    "GET_LIB_DOC_EXCLUDES": "workspace.api.schema.doc_excludes",
    # Dashboard restriction, privilege and collaborator levels share one choice set.
    # Enum component names as the reference API publishes them, for clients generated from either schema.
    "ENUM_NAME_OVERRIDES": {
        "DashboardRestrictionLevel": "dashboards.core.models.RestrictionLevel",
        "OrganizationMembershipLevel": "organizations.models.Membership.Level",
        "ProjectKeyScope": "apikeys.scopes.PROJECT_SCOPES",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # Django's own loggers pass their records to the root handler instead of printing them twice.
    "loggers": {
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        # The MCP SDK logs the start and end of every stateless exchange at INFO: one request, three lines.
        "mcp": {"handlers": [], "level": "WARNING", "propagate": True},
    },
}


def proxy_ssl_header(value: str) -> tuple[str, str] | None:
    """`SECURE_PROXY_SSL_HEADER` from `Header-Name: value` (the header the proxy sets on HTTPS requests); `off`: none,
    for a service that is reached without a proxy."""
    if value.strip().lower() in ("off", "none", "false"):
        return None
    name, separator, expected = value.partition(":")
    if not separator or not name.strip() or not expected.strip():
        raise ImproperlyConfigured(f"SECURE_PROXY_SSL_HEADER must read 'Header-Name: value' or 'off', not {value!r}.")
    return "HTTP_" + name.strip().upper().replace("-", "_"), expected.strip()


if not DEBUG:
    SECURE_PROXY_SSL_HEADER = proxy_ssl_header(os.environ.get("SECURE_PROXY_SSL_HEADER") or "X-Forwarded-Proto: https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # Probes call these over plain HTTP inside the network, and most count a redirect as success.
    SECURE_REDIRECT_EXEMPT = [r"^healthz/?$", r"^readyz/?$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
