"""The shapes of endpoints, their versions, a run's request and their usage."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from pipelines.endpoints.models import Endpoint, EndpointVersion
from pipelines.endpoints.parameters import SchemaInvalid, bind, check_schema, placeholders, samples
from pipelines.query.errors import QueryError
from pipelines.query.hogql import MAX_LIMIT as MAX_ROWS
from pipelines.query.runner import validate_query
from pipelines.query.serializers import QueryNodeField
from workspace.api.serializers import ModelSerializer
from workspace.serializers import UserBasicSerializer

PARAMETERS_SCHEMA = {
    "type": "object",
    "description": "A JSON Schema object: `type: object`, `properties` (each with `type` string, integer, number or "
    "boolean, and optionally `enum`, `format` date or date-time, `minimum`, `maximum`, `pattern`, `default`, "
    "`description`) and `required`.",
    "properties": {
        "type": {"type": "string", "enum": ["object"]},
        "properties": {"type": "object", "additionalProperties": {"type": "object"}},
        "required": {"type": "array", "items": {"type": "string"}},
    },
}


@extend_schema_field(PARAMETERS_SCHEMA)
class ParametersField(serializers.JSONField):
    """An endpoint's parameters, as a JSON Schema object (pipelines.endpoints.parameters)."""


def _nested(path: tuple[str, ...], detail: str):
    """An error at `path` below the field, nested so that its `attr` names the keyword
    (`parameters__properties__country__minimum`)."""
    error: object = [detail]
    for key in reversed(path):
        error = {key: error}
    return error


class EndpointSerializer(ModelSerializer):
    """An endpoint: its name (a slug, unique in the project, by which it is run), the query it runs (any node
    `/query/` runs, with `{variables.<name>}` placeholders) and its parameters. `version` counts the changes of
    `query` and `parameters`."""

    created_by = UserBasicSerializer(read_only=True, allow_null=True)
    query = QueryNodeField(
        help_text="A query node, as `/query/` takes it; `{variables.<name>}` stands for a parameter: in a HogQL text, "
        "or as a whole JSON string value."
    )
    parameters = ParametersField(required=False, help_text="The parameters, as a JSON Schema object.")

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "name",
            "description",
            "query",
            "parameters",
            "cache_seconds",
            "version",
            "created_at",
            "created_by",
            "updated_at",
        ]
        read_only_fields = ["id", "version", "created_at", "created_by", "updated_at"]

    def validate_name(self, value: str) -> str:
        taken = self.context["view"].project.endpoints.filter(name=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError("An endpoint of this project already has this name.", code="unique")
        return value

    def validate_parameters(self, value) -> dict:
        try:
            return check_schema(value)
        except SchemaInvalid as error:
            raise serializers.ValidationError(_nested(error.path, error.detail)) from None

    def validate(self, attrs: dict) -> dict:
        """The query is checked as `/query/` checks one (QueryError naming its path), with each parameter bound to a
        value of its type; each placeholder must name a parameter."""
        if "query" not in attrs and "parameters" not in attrs:
            return attrs
        instance = self.instance
        query = attrs["query"] if "query" in attrs else instance.query
        parameters = attrs.get("parameters") or (instance.parameters if instance else check_schema({"type": "object"}))
        attrs.setdefault("parameters", parameters)
        for name in placeholders(query):
            if name not in parameters["properties"]:
                raise QueryError(
                    f"The placeholder {{variables.{name}}} names no parameter: declare {name!r} in `parameters`.",
                    attr="query",
                )
        validate_query(project=self.context["view"].project, query=bind(query, samples(parameters)))
        return attrs


class EndpointVersionSerializer(ModelSerializer):
    """One published version of an endpoint: its query and parameters as they were, and will stay."""

    created_by = UserBasicSerializer(read_only=True, allow_null=True)
    query = QueryNodeField(read_only=True)
    parameters = ParametersField(read_only=True)

    class Meta:
        model = EndpointVersion
        fields = ["version", "query", "parameters", "created_at", "created_by"]
        read_only_fields = fields


class EndpointRunSerializer(serializers.Serializer):
    """The body of a POST run: the parameters' values, typed as JSON types them. Other fields are ignored."""

    parameters = serializers.JSONField(
        required=False, default=dict, help_text="The parameters' values by name, as their schema types them."
    )


class EndpointRunOptionsSerializer(serializers.Serializer):
    """What a run's query string says besides parameters: the version, the output's format, and a page of a HogQL
    result."""

    version = serializers.IntegerField(required=False, min_value=1, help_text="Run this version (default: the latest).")
    format = serializers.ChoiceField(
        choices=["json", "csv", "ndjson"], required=False, help_text="The output's format (else by `Accept`)."
    )
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ROWS, help_text="A HogQL result's rows in one page (default: all)."
    )
    offset = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_ROWS, help_text="The first row of the page (HogQL)."
    )


class UsageWindowSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    errors = serializers.IntegerField()
    rows = serializers.IntegerField()
    cache_hit_ratio = serializers.FloatField(allow_null=True)
    p50_ms = serializers.IntegerField(allow_null=True)
    p95_ms = serializers.IntegerField(allow_null=True)


class EndpointUsageSerializer(serializers.Serializer):
    """An endpoint's runs over the last day and the last week."""

    day = UsageWindowSerializer()
    week = UsageWindowSerializer()
