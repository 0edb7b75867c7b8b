"""Names that end up in object keys: an S3 destination's `prefix` is a plain relative path (parts between single
slashes, an optional trailing one), refused otherwise with a 400 naming it; the schema publishes the same rule, and
the exporter refuses a prefix stored before it."""

import datetime as dt
import random

import jsonschema
import pytest

from pipelines.batch_exports.destinations import DESTINATIONS, DestinationError, export_events
from pipelines.batch_exports.destinations.base import ExportContext
from pipelines.batch_exports.destinations.config import PREFIX_PATTERN, prefix_problem
from pipelines.batch_exports.destinations.s3 import base_key
from pipelines.batch_exports.models import BatchExport
from tests.pipelines.factories import BatchExportFactory
from tests.pipelines.test_destination_schema import as_json_schema

BAD_PREFIXES = [
    "../escape",
    "exports/../../other",
    "..",
    "./here",
    "a/./b",
    "/absolute",
    "/",
    "//",
    "a//b",
    "exports//",
    "a\\b",
    "a\x01b",
    "tab\there",
    "line\nbreak",
    "del\x7f",
    "   ",
    "x" * 201,
]
GOOD_PREFIXES = ["exports/2026/", "exports", "a/b/c", "...dots/..x/x..", "with space/é", ""]
START = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)


def exports_url(project) -> str:
    return f"/api/projects/{project.pk}/batch_exports/"


def s3_config(**overrides) -> dict:
    return {
        "bucket_name": "bucket",
        "region": "us-east-1",
        "aws_access_key_id": "AKIAEXAMPLE",
        "aws_secret_access_key": "s3-secret",
        **overrides,
    }


def create(client, project, config: dict):
    body = {"name": "Prefixed", "destination": {"type": "S3", "config": config}, "interval": "hour"}
    return client.post(exports_url(project), body, format="json")


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


@pytest.mark.parametrize("prefix", BAD_PREFIXES, ids=repr)
def test_a_bad_prefix_is_refused_naming_it_and_nothing_is_stored(client, project, prefix):
    response = create(client, project, s3_config(prefix=prefix))

    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["type"], body["code"], body["attr"]) == ("validation_error", "invalid", "destination__config__prefix")
    assert "prefix" in body["detail"]
    assert not BatchExport.objects.exists()


@pytest.mark.parametrize("prefix", BAD_PREFIXES, ids=repr)
def test_a_bad_prefix_in_a_patch_is_refused_and_the_stored_one_kept(client, project, prefix):
    export = BatchExportFactory(project=project, destination_config=s3_config(prefix="events/"))
    url = f"{exports_url(project)}{export.pk}/"

    response = client.patch(url, {"destination": {"config": {"prefix": prefix}}}, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["attr"] == "destination__config__prefix"
    export.refresh_from_db()
    assert export.destination_config["prefix"] == "events/"


@pytest.mark.parametrize("prefix", [*GOOD_PREFIXES, None], ids=repr)
def test_a_relative_prefix_is_stored_as_given(client, project, prefix):
    response = create(client, project, s3_config(prefix=prefix))

    assert response.status_code == 201, response.content
    assert response.json()["destination"]["config"]["prefix"] == prefix
    assert BatchExport.objects.get().destination_config["prefix"] == prefix


def test_the_schema_publishes_the_same_rule():
    schema = as_json_schema(DESTINATIONS["S3"].Config.openapi_schema())
    assert schema["properties"]["prefix"]["anyOf"][0]["pattern"] == PREFIX_PATTERN.pattern
    for prefix in GOOD_PREFIXES:
        jsonschema.validate(s3_config(prefix=prefix), schema)
    for prefix in BAD_PREFIXES:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(s3_config(prefix=prefix), schema)


def test_the_published_pattern_accepts_exactly_what_the_check_accepts():
    """The fuzzer sends what the pattern allows and expects a 2xx, and what it refuses and expects a 400."""
    alphabet = ["a", "é", ".", "/", " ", "\u3000", "\xa0", "\\", "\t", "\n", "\x01", "\x1c", "\x7f", "\x85"]
    generator = random.Random(20260101)
    for _ in range(20_000):
        prefix = "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 7)))
        assert (PREFIX_PATTERN.fullmatch(prefix) is not None) == (prefix_problem(prefix) is None), repr(prefix)


def context(prefix) -> ExportContext:
    return ExportContext(
        destination_type="S3",
        config=s3_config(prefix=prefix),
        batch_export_id="0b7a4f8e-0000-4000-8000-000000000001",
        run_id="0b7a4f8e-0000-4000-8000-000000000002",
        data_interval_start=START,
        data_interval_end=START + dt.timedelta(hours=1),
        log=lambda level, message: None,
    )


@pytest.mark.parametrize(
    ("prefix", "key"),
    [
        ("exports/2026/", "exports/2026/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z"),
        ("exports", "exports/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z"),
        ("/stored/before/", "stored/before/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z"),  # a leading / was dropped
        (None, "2024-05-01T10:00:00Z-2024-05-01T11:00:00Z"),
    ],
)
def test_an_object_key_starts_with_the_prefix_and_one_slash(prefix, key):
    assert base_key(context(prefix)) == key


@pytest.mark.parametrize("prefix", ["exports/../../other", "a\\b", "a//b"])
def test_a_bad_prefix_stored_before_the_rule_fails_the_run_before_anything_is_written(prefix):
    lines = []
    with pytest.raises(DestinationError) as error:
        export_events(
            "S3",
            s3_config(prefix=prefix, endpoint_url="http://127.0.0.1:9"),
            iter([]),
            batch_export_id="0b7a4f8e-0000-4000-8000-000000000001",
            run_id="0b7a4f8e-0000-4000-8000-000000000002",
            data_interval_start=START,
            data_interval_end=START + dt.timedelta(hours=1),
            log=lambda level, message: lines.append(message),
        )

    assert "destination.config.prefix" in error.value.message
    assert not error.value.retryable
    assert lines == []
