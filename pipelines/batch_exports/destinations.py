"""What each batch-export destination type needs in its `config`, and which of its keys are secrets."""

import re
from dataclasses import dataclass, field

from rest_framework.exceptions import ErrorDetail

from workspace.validators import path_problem

# Config keys that are stored but never returned by the API nor written to the activity log.
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

# What a URL key must look like; the schema publishes the same pattern. Whether its host may be reached is decided
# when a run starts (pipelines.batch_exports.exporters.safety), since what a name resolves to can change.
URL_PATTERN = re.compile(r"^https?://[^/?#\s]+(?:[/?#]\S*)?$")

# What a prefix key (the folder of a destination's object keys) must look like; the schema publishes the same pattern.
# It accepts exactly what `prefix_problem` accepts: empty, or parts between single slashes with an optional trailing
# one, no part empty, '.' or '..', without backslashes or control characters, and not blank as a whole.
_CHAR = r"[^/\\\x00-\x1f\x7f]"  # any character of a part
_NOT_DOT = r"[^./\\\x00-\x1f\x7f]"
_NOT_DOT_OR_SPACE = r"[^\s./\\\x00-\x1f\x7f]"
_SPACE = r"[^\S\x00-\x1f\x7f]"
# A part other than '.' and '..': at most two dots followed by anything else, or three dots or more.
_PART = rf"(?:\.{{0,2}}{_NOT_DOT}{_CHAR}*|\.{{3}}{_CHAR}*)"
# The same, when it is the only part, that is also more than blanks.
_ONLY_PART = rf"(?:{_SPACE}*{_NOT_DOT_OR_SPACE}{_CHAR}*|{_SPACE}+\.{_CHAR}*|\.{_NOT_DOT}{_CHAR}*|\.\.{_CHAR}+)"
PREFIX_PATTERN = re.compile(rf"^(?:(?:{_ONLY_PART}|{_PART}(?:/{_PART})+)/?)?$")
PREFIX_MAX_LENGTH = 200

S3_FILE_FORMATS = {
    # file format -> compressions it supports (None means uncompressed)
    "JSONLines": {None, "gzip", "brotli"},
    "Parquet": {None, "gzip", "brotli", "zstd", "lz4", "snappy"},
}


@dataclass(frozen=True)
class DestinationSpec:
    required: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()  # keys whose value, when present, must be a string
    integers: tuple[str, ...] = ()
    booleans: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    one_of: tuple[tuple[str, ...], ...] = field(default=())  # at least one key of each group must be present
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, allowed values) for string keys with fixed values
    urls: tuple[str, ...] = ()  # string keys that, when present, must be http(s) URLs with a host
    prefixes: tuple[str, ...] = ()  # string keys that end up at the start of object keys (PREFIX_PATTERN)


_EVENT_FILTERS = ("exclude_events", "include_events")

DESTINATIONS: dict[str, DestinationSpec] = {
    "S3": DestinationSpec(
        required=("bucket_name", "region", "aws_access_key_id", "aws_secret_access_key"),
        strings=(
            "bucket_name",
            "region",
            "prefix",
            "aws_access_key_id",
            "aws_secret_access_key",
            "endpoint_url",
            "kms_key_id",
            "encryption",
        ),
        integers=("max_file_size_mb",),
        lists=_EVENT_FILTERS,
        choices=(("encryption", ("AES256", "aws:kms")),),
        urls=("endpoint_url",),
        prefixes=("prefix",),
    ),
    "Snowflake": DestinationSpec(
        required=("account", "database", "warehouse", "user", "schema", "table_name"),
        strings=("account", "database", "warehouse", "user", "password", "private_key", "schema", "table_name", "role"),
        lists=_EVENT_FILTERS,
        one_of=(("password", "private_key"),),
    ),
    "Postgres": DestinationSpec(
        required=("host", "database", "user", "password", "schema", "table_name"),
        strings=("host", "database", "user", "password", "schema", "table_name"),
        integers=("port",),
        booleans=("has_self_signed_cert",),
        lists=_EVENT_FILTERS,
    ),
    "Redshift": DestinationSpec(
        required=("host", "database", "user", "password", "schema", "table_name"),
        strings=("host", "database", "user", "password", "schema", "table_name", "properties_data_type"),
        integers=("port",),
        lists=_EVENT_FILTERS,
        # How JSON columns are stored: SUPER (queryable) or VARCHAR(65535) holding JSON text.
        choices=(("properties_data_type", ("super", "varchar")),),
    ),
    "BigQuery": DestinationSpec(
        required=("project_id", "dataset_id", "table_id", "private_key", "private_key_id", "token_uri", "client_email"),
        strings=("project_id", "dataset_id", "table_id", "private_key", "private_key_id", "token_uri", "client_email"),
        booleans=("use_json_type",),
        lists=_EVENT_FILTERS,
    ),
    "HTTP": DestinationSpec(required=("url", "token"), strings=("url", "token"), lists=_EVENT_FILTERS, urls=("url",)),
    "NoOp": DestinationSpec(),
}


def known_keys(destination_type: str) -> frozenset[str]:
    """The keys a config of this type may hold: those its spec names (and S3's file format and compression)."""
    spec = DESTINATIONS[destination_type]
    keys = {*spec.required, *spec.strings, *spec.integers, *spec.booleans, *spec.lists, *spec.urls}
    keys |= {key for key, _ in spec.choices} | {key for group in spec.one_of for key in group}
    if destination_type == "S3":
        keys |= {"file_format", "compression"}
    return frozenset(keys)


def prefix_problem(prefix: str) -> str | None:
    """Why a prefix of object keys is refused, or None: a relative path, which may end with one `/`, or empty."""
    if prefix == "":
        return None
    if len(prefix) > PREFIX_MAX_LENGTH:
        return f"A prefix is at most {PREFIX_MAX_LENGTH} characters long."
    return path_problem(prefix[:-1] if len(prefix) > 1 and prefix.endswith("/") else prefix, "prefix")


def public_config(config: dict | None) -> dict:
    """The config without its secrets: what responses and the activity log show."""
    return {key: value for key, value in (config or {}).items() if key not in SECRET_KEYS}


def config_errors(destination_type: str, config) -> dict:
    """Errors of a config for a destination type, as `{"config": ...}` ready to nest under `destination`.

    An empty dict means the config is valid. A problem with one key is reported under that key, so the
    error's `attr` reads `destination__config__<key>`.
    """
    if not isinstance(config, dict):
        return {"config": [ErrorDetail("Expected an object of configuration values.", code="invalid")]}
    spec = DESTINATIONS[destination_type]
    errors: dict[str, list[ErrorDetail]] = {}

    def add(key: str, message: str, code: str = "invalid") -> None:
        errors.setdefault(key, []).append(ErrorDetail(message, code=code))

    # Only what the type defines is kept: anything else would be stored, and exported, as given.
    for key in config:
        if key not in known_keys(destination_type):
            add(key, f"Unknown key for a {destination_type} destination.")
    for key in spec.required:
        if config.get(key) in (None, ""):
            add(key, f"This field is required for a {destination_type} destination.", "required")
    for key in spec.strings:
        if config.get(key) is not None and not isinstance(config[key], str):
            add(key, "Expected a string.")
    for key in spec.integers:
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536):
            add(key, "Expected an integer between 1 and 65535.")
    for key in spec.booleans:
        if config.get(key) is not None and not isinstance(config[key], bool):
            add(key, "Expected a boolean.")
    for key in spec.lists:
        value = config.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(item, str) for item in value)):
            add(key, "Expected a list of strings.")
    for key, allowed in spec.choices:
        value = config.get(key)
        if isinstance(value, str) and value not in allowed:
            add(key, f"Use null or one of: {', '.join(allowed)}.")
    for key in spec.urls:
        value = config.get(key)
        if isinstance(value, str) and value and not URL_PATTERN.match(value):
            add(key, "Expected an http:// or https:// URL with a host.")
    for key in spec.prefixes:
        value = config.get(key)
        problem = prefix_problem(value) if isinstance(value, str) else None
        if problem:
            add(key, problem)
    for group in spec.one_of:
        if all(config.get(key) in (None, "") for key in group):
            add(group[0], f"One of {', '.join(group)} is required for a {destination_type} destination.", "required")
    if destination_type == "S3":
        file_format = config.get("file_format", "JSONLines")
        compression = config.get("compression")
        if not isinstance(file_format, str) or file_format not in S3_FILE_FORMATS:
            add("file_format", f"Unknown file format; use one of: {', '.join(S3_FILE_FORMATS)}.")
        elif (
            not (compression is None or isinstance(compression, str)) or compression not in S3_FILE_FORMATS[file_format]
        ):
            known = sorted(value for value in S3_FILE_FORMATS[file_format] if value)
            add("compression", f"Unknown compression for {file_format}; use null or one of: {', '.join(known)}.")
    return {"config": errors} if errors else {}
