"""The schema of a batch-export create states what each destination type needs in its config."""

import jsonschema
import pytest

from pipelines.batch_exports.destinations import DESTINATIONS
from tests.pipelines.test_batch_exports_api import BAD_CONFIGS, VALID_CONFIGS


def as_json_schema(schema):
    """OpenAPI 3.0's `nullable` as JSON Schema's `null` type."""
    if isinstance(schema, list):
        return [as_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: as_json_schema(value) for key, value in schema.items() if key != "nullable"}
    if schema.get("nullable"):
        converted = {"anyOf": [converted, {"type": "null"}]}
    return converted


@pytest.mark.parametrize("destination_type", list(VALID_CONFIGS))
def test_every_valid_config_fits_its_schema(destination_type):
    schema = as_json_schema(DESTINATIONS[destination_type].Config.openapi_schema())
    jsonschema.validate(VALID_CONFIGS[destination_type], schema)


@pytest.mark.parametrize("destination_type,config,attr", BAD_CONFIGS, ids=lambda value: str(value)[:40])
def test_every_refused_config_breaks_its_schema(destination_type, config, attr):
    schema = as_json_schema(DESTINATIONS[destination_type].Config.openapi_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, schema)


def test_the_published_create_schema_requires_the_s3_keys(db):
    from rest_framework.test import APIClient

    schema = APIClient().get("/api/schema/?format=json").json()
    destination = schema["components"]["schemas"]["BatchExportDestinationCreateRequest"]
    s3 = next(item for item in destination["oneOf"] if item["properties"]["type"]["allOf"][0]["enum"] == ["S3"])
    assert s3["required"] == ["type", "config"]
    assert set(s3["properties"]["config"]["required"]) == {
        "bucket_name",
        "region",
        "aws_access_key_id",
        "aws_secret_access_key",
    }
