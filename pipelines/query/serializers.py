from rest_framework import serializers

from pipelines.query.runner import REFRESH_MODES


class QueryRequestSerializer(serializers.Serializer):
    """The body of a query request. `query` is read strictly by the query layer (pipelines.query.nodes), so that an
    unknown field inside it is a 400 naming its path; other fields of the body are ignored, as everywhere."""

    query = serializers.JSONField(help_text="A query node: TrendsQuery, HogQLQuery, or a wrapper of one.")
    refresh = serializers.ChoiceField(
        choices=REFRESH_MODES,
        default="blocking",
        help_text="blocking: cached while fresh, else computed; force_blocking: always computed; force_cache: never.",
    )

    class Meta:
        ref_name = "Query"  # QueryRequest in the schema, as the reference names it
