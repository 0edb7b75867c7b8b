"""What every destination shares: the `Destination` class each type subclasses, the result, the error, the run's
context, rows and batching, and scrubbing secrets out of any text that leaves a destination."""

import json
import re
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from importlib import import_module
from itertools import islice
from typing import ClassVar

from pipelines.batch_exports.destinations.config import DestinationConfig

Log = Callable[[str, str], None]

# Config keys that are stored but never returned by the API nor written to the activity log, whatever the type; their
# values are sealed at rest (pipelines.batch_exports.secrets) and scrubbed from every message.
SECRET_KEYS = frozenset(
    {
        "aws_secret_access_key",
        "aws_session_token",
        "password",
        "private_key",
        "private_key_id",
        "private_key_passphrase",
        "token",
        "secret",
        "api_key",
    }
)
# The steps of a destination test (DECISIONS.md §17), in order; each type has those it can take (`Destination.steps`).
STEP_NAMES = ("connect", "authenticate", "write_permission", "write_and_remove")


@dataclass(frozen=True)
class ExportResult:
    """What one run moved: `records` events (rows, lines, capture events) and `bytes` written to the destination
    (the files' size for S3, the request bodies for HTTP, the encoded rows for databases)."""

    records: int
    bytes: int


class DestinationError(Exception):
    """A run failed at the destination. `message` is safe to store and show (no credentials in it); `retryable`
    says whether the same run may succeed later unchanged (network, 5xx, timeouts) or needs the config fixed
    (wrong password, unknown bucket, 4xx)."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Column:
    """One exported column: `name` in the destination, read from the event by `path`.

    `path` is `("uuid",)`, `("timestamp",)`... for the event's own fields, or `("properties", "$browser")` for a
    property (a missing property reads as None).
    """

    name: str
    path: tuple[str, ...]

    @property
    def source(self) -> str:
        return self.path[0]

    def read(self, event: dict):
        value = event.get(self.path[0])
        for step in self.path[1:]:
            value = value.get(step) if isinstance(value, dict) else None
        return value


# `inserted_at`: when the service received the event. `created_at` is the same time under the name exports have
# always carried it, kept so that existing destination tables and queries go on working.
EVENT_FIELDS = ("uuid", "event", "distinct_id", "properties", "timestamp", "inserted_at", "created_at", "team_id")
DEFAULT_COLUMNS: tuple[Column, ...] = tuple(Column(name, (name,)) for name in EVENT_FIELDS)
# The event fields that hold a moment (an aware datetime).
TIME_PATHS = (("timestamp",), ("inserted_at",), ("created_at",), ("updated_at",))
# The fields written as text, and as integers; any other is JSON.
TEXT_PATHS = (("uuid",), ("event",), ("distinct_id",), ("person_id",))
INTEGER_PATHS = (("team_id",), ("person_version",))
# A persons export's row (`pipelines.events.persons.iterate_person_rows`): one per distinct id, keyed by (team_id,
# distinct_id), so that a destination always says which person an id names, merges included, as the reference's
# persons export does.
PERSON_FIELDS = ("team_id", "distinct_id", "person_id", "properties", "person_version", "created_at", "updated_at")
PERSON_COLUMNS: tuple[Column, ...] = tuple(Column(name, (name,)) for name in PERSON_FIELDS)
PERSON_KEY = ("team_id", "distinct_id")


@dataclass
class ExportContext:
    """One run of one export: the destination's config and who to tell what happens."""

    destination_type: str
    config: dict
    batch_export_id: str
    run_id: str
    data_interval_start: datetime
    data_interval_end: datetime
    log: Log
    columns: tuple[Column, ...] = DEFAULT_COLUMNS
    secrets: tuple[str, ...] = field(default=())
    # The columns that name a row at the destination (its upsert key): an event's uuid, a person row's
    # (team_id, distinct_id).
    key: tuple[str, ...] = ("uuid",)

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def info(self, message: str) -> None:
        self.log("INFO", self.scrub(message))

    def debug(self, message: str) -> None:
        self.log("DEBUG", self.scrub(message))

    def warning(self, message: str) -> None:
        self.log("WARNING", self.scrub(message))

    def error(self, message: str, retryable: bool = False) -> DestinationError:
        """A DestinationError whose message has no secret of this config in it."""
        return DestinationError(self.scrub(message), retryable=retryable)


def public_config(config: dict | None) -> dict:
    """The config without its secrets: what responses and the activity log show."""
    return {key: value for key, value in (config or {}).items() if key not in SECRET_KEYS}


def secret_values(config: dict) -> tuple[str, ...]:
    """The config's secret values, longest first (so a secret containing another is replaced whole)."""
    values = {str(value) for key, value in config.items() if key in SECRET_KEYS and value not in (None, "")}
    return tuple(sorted(values, key=len, reverse=True))


_CREDENTIAL_PATTERNS = (
    # user:password@ in URLs and DSNs
    (re.compile(r"(?P<keep>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@"), r"\g<keep>***@"),
    # password=..., secret: ..., token="..." in connection strings and messages
    (
        re.compile(
            r"(?P<keep>\b(?:password|passwd|pwd|secret|token|api_key|aws_secret_access_key|private_key)\b\s*[=:]\s*)"
            r"(?:'[^']*'|\"[^\"]*\"|[^\s,;&)]+)",
            re.IGNORECASE,
        ),
        r"\g<keep>***",
    ),
)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret value and anything shaped like a credential replaced by `***`."""
    text = str(text)
    for secret in secrets:
        if len(secret) >= 3:
            text = text.replace(secret, "***")
    for pattern, replacement in _CREDENTIAL_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def filter_events(events: Iterable[dict], config: dict) -> Iterator[dict]:
    """The events the config's `include_events` / `exclude_events` let through (empty lists: all of them)."""
    include = set(config.get("include_events") or ())
    exclude = set(config.get("exclude_events") or ())
    for event in events:
        name = event.get("event")
        if include and name not in include:
            continue
        if name in exclude:
            continue
        yield event


def json_default(value):
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def dumps(value) -> str:
    """Compact JSON; datetimes as ISO 8601, anything else unknown (UUID, Decimal) as its string."""
    return json.dumps(value, default=json_default, separators=(",", ":"), ensure_ascii=False)


def quote_identifier(name: str) -> str:
    """A SQL identifier in double quotes (PostgreSQL, Redshift, Snowflake)."""
    return '"' + name.replace('"', '""') + '"'


def require_extra(module: str, extra: str, destination: str):
    """The module of a vendor's connector, or a DestinationError (not retryable) saying which extra installs it."""
    try:
        return import_module(module)
    except ImportError:
        raise DestinationError(
            f"The {destination} destination needs its connector, which is not installed: "
            f"pip install 'analytics-workspace[{extra}]'"
        ) from None


def open_socket(address: str, port: int, timeout: float, context: ExportContext) -> None:
    """A TCP connection to the destination, closed at once: whether it can be reached at all."""
    try:
        socket.create_connection((address, port), timeout=timeout).close()
    except OSError as exc:
        raise context.error(f"Could not connect to {address}:{port}: {type(exc).__name__}: {exc}") from None


class Skip(Exception):
    """A step of a test that cannot be run here; its message says why."""


class Destination:
    """A destination type: what its config holds (`Config`), how a run moves rows to it (`export`) and how it is
    tested before it is trusted (a `check_<step>` method for each of its `steps`).

    An instance serves one run or one test, whose `context` holds the config and where log lines go. A test's
    steps run in order on one instance, so what a step opens (a client, a connection) is there for the next one;
    `close` lets go of it.
    """

    name: ClassVar[str]  # the type, as the API and the database call it
    Config: ClassVar[type[DestinationConfig]]
    takes_persons: ClassVar[bool] = False  # whether a persons export's rows can go there, or events only
    steps: ClassVar[tuple[str, ...]] = STEP_NAMES
    # What a test's steps open, for the next steps: a database's or a server's connection, or a vendor's client.
    connection = None
    client = None

    def __init__(self, context: ExportContext):
        self.context = context
        self.config = context.config

    @classmethod
    def problems(cls, config) -> list | dict:
        """What is wrong with `config` for this type, ready to nest under `config` (`DestinationConfig.problems`)."""
        return cls.Config.problems(config, cls.name)

    def export(self, events: Iterable[dict]) -> ExportResult:
        """Move a run's rows to the destination (pipelines.batch_exports.destinations.export_events)."""
        raise NotImplementedError(f"{type(self).__name__} must define export()")

    def check(self, step: str, timeout: float) -> str:
        """Run one step of a test: its message when it passes, DestinationError when it fails, Skip when it cannot
        be run here."""
        return getattr(self, f"check_{step}")(timeout)

    def close(self) -> None:
        """Let go of what the steps opened; called whatever happened."""
        for opened in (self.connection, self.client):
            if opened is not None:
                opened.close()


class ConnectorDestination(Destination):
    """A destination reached through its vendor's connector, an optional extra: a test connects and logs in when
    the connector is installed (`check_connect`, `check_authenticate`); what a run writes is not tried."""

    connector: ClassVar[str]  # the connector's module
    extra: ClassVar[str]  # the pyproject extra that installs it

    def check(self, step: str, timeout: float) -> str:
        try:
            import_module(self.connector)
        except ImportError:
            raise Skip(
                f"Not checked: testing a {self.name} destination needs its connector, which is not installed "
                f"(pip install 'analytics-workspace[{self.extra}]')."
            ) from None
        if step in ("write_permission", "write_and_remove"):
            raise Skip(f"Not checked for {self.name}: the first run creates and writes the table.")
        return super().check(step, timeout)

    def connector_module(self, module: str):
        """A module of the connector (`require_extra`)."""
        return require_extra(module, self.extra, self.name)
