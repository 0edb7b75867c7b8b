"""Settings, read from the environment so one codebase runs in development, tests and production.

Every value has a development default; production sets `DEBUG=false`, `SECRET_KEY`, `ALLOWED_HOSTS`
and `DATABASE_URL` (see README "Configuration").
"""

import os
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
    "workspace",
    "organizations",
    "apikeys",
    "dashboards",
    "pipelines",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "workspace.api.middleware.APIRequestSizeMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite keeps connections per thread; a long-lived connection buys nothing there.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATA_DIR.mkdir(parents=True, exist_ok=True)

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

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))

# Shared cache: Redis when REDIS_URL is set (rate-limit counters then hold across processes),
# otherwise a per-process memory cache.
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "workspace"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Request bodies above this size are refused with 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BODY_BYTES", 1024 * 1024)

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

# Organization invites expire after this many days.
INVITE_EXPIRY_DAYS = env_int("INVITE_EXPIRY_DAYS", 3)

# Domain verification: TXT records at "<prefix>.<domain>".
DOMAIN_VERIFICATION_PREFIX = os.environ.get("DOMAIN_VERIFICATION_PREFIX", "_workspace-challenge")
DOMAIN_VERIFICATION_NAMESERVERS = env_list("DOMAIN_VERIFICATION_NAMESERVERS", [])  # empty: the system resolver
DOMAIN_VERIFICATION_PORT = env_int("DOMAIN_VERIFICATION_PORT", 53)
DOMAIN_VERIFICATION_TIMEOUT = float(os.environ.get("DOMAIN_VERIFICATION_TIMEOUT", "5"))

# Plugin catalogue: a bundled JSON file, or a URL serving the same document.
PLUGIN_CATALOGUE_URL = os.environ.get("PLUGIN_CATALOGUE_URL", "")

# Personal API keys.
API_KEY_PREFIX = "phx_"
API_KEY_LAST_USED_INTERVAL_SECONDS = 3600

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apikeys.authentication.PersonalAPIKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "workspace.api.permissions.APIScopePermission",
    ],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "workspace.api.pagination.LimitOffsetPagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": [
        "workspace.api.throttling.BurstRateThrottle",
        "workspace.api.throttling.SustainedRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "burst": os.environ.get("API_RATE_LIMIT_BURST", "480/minute"),
        "sustained": os.environ.get("API_RATE_LIMIT_SUSTAINED", "4800/hour"),
    },
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
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/",
    "SECURITY": [{"PersonalAPIKeyAuth": []}],
    # Dashboard restriction, privilege and collaborator levels share one choice set.
    # Enum component names as the reference API publishes them, for clients generated from either schema.
    "ENUM_NAME_OVERRIDES": {
        "DashboardRestrictionLevel": "dashboards.models.RestrictionLevel",
        "OrganizationMembershipLevel": "organizations.models.Membership.Level",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # Django's own loggers pass their records to the root handler instead of printing them twice.
    "loggers": {"django": {"handlers": [], "level": "INFO", "propagate": True}},
}

if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
