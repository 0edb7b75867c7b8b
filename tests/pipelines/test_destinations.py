"""Config keys of destinations with a fixed shape: what is accepted next to what test_batch_exports_api refuses."""

import pytest

from pipelines.batch_exports.destinations import DESTINATIONS
from pipelines.batch_exports.models import BatchExport
from tests.pipelines.test_batch_exports_api import VALID_CONFIGS


@pytest.mark.parametrize(
    ("destination_type", "changes"),
    [
        ("S3", {"endpoint_url": "http://minio:9000"}),
        ("S3", {"endpoint_url": "https://s3.example.com/path?x=1"}),
        ("S3", {"endpoint_url": ""}),
        ("S3", {"endpoint_url": None}),
        ("S3", {"encryption": "aws:kms", "kms_key_id": "key", "max_file_size_mb": 100}),
        ("Redshift", {"properties_data_type": "varchar"}),
        ("Redshift", {"properties_data_type": "super"}),
        ("HTTP", {"url": "http://127.0.0.1:8000/batch/"}),
    ],
)
def test_accepted(destination_type, changes):
    assert DESTINATIONS[destination_type].problems({**VALID_CONFIGS[destination_type], **changes}) == {}


@pytest.mark.parametrize(
    ("destination_type", "changes", "key"),
    [
        ("S3", {"endpoint_url": "minio:9000"}, "endpoint_url"),
        ("S3", {"endpoint_url": "http://"}, "endpoint_url"),
        ("S3", {"encryption": "aes256"}, "encryption"),
        ("S3", {"max_file_size_mb": "100"}, "max_file_size_mb"),
        ("Redshift", {"properties_data_type": "JSON"}, "properties_data_type"),
        ("HTTP", {"url": "https://exa mple.com/batch"}, "url"),
    ],
)
def test_refused(destination_type, changes, key):
    problems = DESTINATIONS[destination_type].problems({**VALID_CONFIGS[destination_type], **changes})
    assert list(problems) == [key]


def first_problem(destination_type, config) -> tuple[str, str, str]:
    problems = DESTINATIONS[destination_type].problems(config)
    key = next(iter(problems))
    return key, str(problems[key][0]), problems[key][0].code


@pytest.mark.parametrize(
    ("destination_type", "changes", "expected"),
    [
        # Unknown keys first, then missing ones, then each kind of wrong value in turn, then rules over several keys:
        # the API shows the first problem, the one the checks before the Config models found first.
        (
            "S3",
            {"bucket_name": "", "acl": "public-read", "max_file_size_mb": 0},
            ("acl", "Unknown key for a S3 destination.", "invalid"),
        ),
        (
            "S3",
            {"max_file_size_mb": 0, "region": None, "file_format": "CSV"},
            ("region", "This field is required for a S3 destination.", "required"),
        ),
        (
            "S3",
            {"encryption": "rot13", "max_file_size_mb": True, "kms_key_id": 7},
            ("kms_key_id", "Expected a string.", "invalid"),
        ),
        (
            "S3",
            {"encryption": "rot13", "max_file_size_mb": 70000},
            ("max_file_size_mb", "Expected an integer between 1 and 65535.", "invalid"),
        ),
        (
            "S3",
            {"compression": "zip", "endpoint_url": "ftp://x", "encryption": "rot13"},
            ("encryption", "Use null or one of: AES256, aws:kms.", "invalid"),
        ),
        (
            "S3",
            {"compression": "zip", "prefix": "../x", "endpoint_url": "ftp://x"},
            ("endpoint_url", "Expected an http:// or https:// URL with a host.", "invalid"),
        ),
        (
            "S3",
            {"file_format": None},
            ("file_format", "Unknown file format; use one of: JSONLines, Parquet.", "invalid"),
        ),
        (
            "S3",
            {"file_format": "JSONLines", "compression": "zstd"},
            ("compression", "Unknown compression for JSONLines; use null or one of: brotli, gzip.", "invalid"),
        ),
        (
            "Snowflake",
            {"password": "", "include_events": ["a", 1]},
            ("include_events", "Expected a list of strings.", "invalid"),
        ),
        (
            "Snowflake",
            {"password": None, "private_key": ""},
            ("password", "One of password, private_key is required for a Snowflake destination.", "required"),
        ),
        ("Postgres", {"has_self_signed_cert": "yes"}, ("has_self_signed_cert", "Expected a boolean.", "invalid")),
        ("Postgres", {"schema": 5, "port": "5432"}, ("schema", "Expected a string.", "invalid")),
        ("Postgres", {"schema_": "public"}, ("schema_", "Unknown key for a Postgres destination.", "invalid")),
    ],
)
def test_the_first_problem_is_the_one_the_api_shows(destination_type, changes, expected):
    assert first_problem(destination_type, {**VALID_CONFIGS[destination_type], **changes}) == expected


def test_a_config_that_is_not_an_object_is_refused_whole():
    assert DESTINATIONS["NoOp"].problems(["not", "an", "object"]) == ["Expected an object of configuration values."]


def test_every_config_refuses_unknown_keys_and_coerces_nothing():
    for destination_type, destination in DESTINATIONS.items():
        assert destination.Config.model_config["extra"] == "forbid", destination_type
        assert destination.Config.model_config["strict"], destination_type


def test_the_destination_types_are_the_registered_ones():
    """The model's choices come from the registry, under the values and labels its migrations record."""
    assert BatchExport.DestinationType.choices == [
        ("S3", "S3"),
        ("Snowflake", "Snowflake"),
        ("Postgres", "Postgres"),
        ("Redshift", "Redshift"),
        ("BigQuery", "Bigquery"),
        ("HTTP", "Http"),
        ("NoOp", "Noop"),
    ]
