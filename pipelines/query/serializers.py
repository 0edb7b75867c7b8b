from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from pipelines.query.runner import REFRESH_MODES


@extend_schema_field({"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}}})
class QueryNodeField(serializers.JSONField):
    """A query node, an object named by its `kind`; the query layer reads the rest strictly."""


class QueryRequestSerializer(serializers.Serializer):
    """The body of a query request. `query` is read strictly by the query layer (pipelines.query.nodes), so that an
    unknown field inside it is a 400 naming its path; other fields of the body are ignored, as everywhere."""

    query = QueryNodeField(
        help_text="A query node: TrendsQuery, FunnelsQuery, RetentionQuery, HogQLQuery, or a wrapper of one."
    )
    refresh = serializers.ChoiceField(
        choices=REFRESH_MODES,
        default="blocking",
        help_text="blocking: cached while fresh, else computed; force_blocking: always computed; force_cache: never.",
    )

    class Meta:
        ref_name = "Query"  # QueryRequest in the schema, as the reference names it
