"""Fields of the core's serializers: restriction levels, tags, the dashboards showing an insight, an insight's
result, a template's name, a version's changes."""

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from dashboards.core.models import Insight, RestrictionLevel
from dashboards.core.results import CACHE_ONLY, insight_result
from dashboards.core.template_library import TEMPLATE_SCHEMA, TEMPLATES_DIR
from workspace.api.fields import StrictCharField, StrictIntegerChoiceField
from workspace.api.schema import openapi_schema
from workspace.api.serializers import prefetched_attribute


class RestrictionLevelField(StrictIntegerChoiceField):
    """21 or 37; one enum in the schema, `DashboardRestrictionLevel`, whatever the field is called."""

    def __init__(self, **kwargs):
        super().__init__(choices=RestrictionLevel.choices, **kwargs)


class TagListField(serializers.ListField):
    """Tags are stored one row each; read them from the prefetched rows, write them as a list of strings."""

    child = StrictCharField(max_length=128)
    # Into a plain list: filling the related manager's cache instead costs a new queryset for every object of a page.
    prefetch_related = (Prefetch("tag_rows", to_attr="prefetched_tag_rows"),)

    def get_attribute(self, instance):
        rows = instance.__dict__.get("prefetched_tag_rows")
        return instance.tag_names if rows is None else [row.name for row in rows]

    def to_internal_value(self, data):
        # Refuse an over-long list before validating each of its items.
        if self.max_length is not None and isinstance(data, list) and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


@extend_schema_field({"type": "array", "items": {"type": "integer"}})
class DashboardIdsField(serializers.ListField):
    """The ids of the (non-deleted) dashboards showing an insight; as input, the dashboards that should.

    Read from the rows `dashboard_tiles` shows (one prefetch for both, see InsightTilesSerializer).
    dashboards.core.permissions.requested_dashboard_ids reads the input the same way, to lock those dashboards' rows
    before the insight's."""

    child = serializers.IntegerField()

    def get_attribute(self, instance):
        tiles = instance.__dict__.get(prefetched_attribute("tiles"))
        return instance.dashboard_ids if tiles is None else [tile.dashboard_id for tile in tiles]


class InsightResultMixin:
    """A read-only field of the insight's result (dashboards.core.results.RESULT_FIELDS, named as the field), from the
    response's InsightResults (serializer context `insight_results`, made by the view with the request's `refresh`)."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def get_attribute(self, insight: Insight):
        results = self.context.get("insight_results")
        if results is None:  # outside a view: the cached result only
            return insight_result(insight, project=insight.project, refresh=CACHE_ONLY)[self.field_name]
        return results.of(insight)[self.field_name]


class InsightResultJSONField(InsightResultMixin, serializers.JSONField):
    pass


class InsightResultBooleanField(InsightResultMixin, serializers.BooleanField):
    pass


class InsightResultCharField(InsightResultMixin, serializers.CharField):
    pass


class InsightResultDateTimeField(InsightResultMixin, serializers.DateTimeField):
    pass


class InsightResultListField(InsightResultMixin, serializers.ListField):
    pass


@extend_schema_field({"type": "string", "enum": ["", *sorted(path.stem for path in TEMPLATES_DIR.glob("*.json"))]})
class TemplateNameField(StrictCharField):
    """The name of a bundled template (dashboards/dashboard_templates), or empty for none."""


class VersionChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


@extend_schema_field(VersionChangeSerializer(many=True))
class VersionChangesField(serializers.Field):
    """The fields an entry changed, `[{"field", "before", "after"}]` (a creation: every field, before null)."""

    def __init__(self, **kwargs):
        super().__init__(source="detail", read_only=True, **kwargs)

    def to_representation(self, detail: dict) -> list[dict]:
        before, after = detail.get("before") or {}, detail.get("after") or {}
        return [{"field": name, "before": before.get(name), "after": after.get(name)} for name in {**before, **after}]


@extend_schema_field(openapi_schema(TEMPLATE_SCHEMA))
class TemplateDocumentField(serializers.JSONField):
    """A template document, as `template_json/` gives it; its schema is the validator's own."""
