"""The shapes of the core's resources: insights, tiles, texts, dashboards, their versions and collaborators."""

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from dashboards.core.fields import (
    DashboardIdsField,
    InsightResultBooleanField,
    InsightResultCharField,
    InsightResultDateTimeField,
    InsightResultJSONField,
    InsightResultListField,
    RestrictionLevelField,
    TagListField,
    TemplateNameField,
    VersionChangesField,
)
from dashboards.core.models import (
    MAX_ID,
    MAX_TAGS_PER_DASHBOARD,
    MAX_TEXT_BODY,
    Dashboard,
    DashboardCollaborator,
    DashboardTile,
    Insight,
    RestrictionLevel,
    Text,
)
from dashboards.core.permissions import can_edit
from dashboards.core.results import RESULT_FIELDS
from dashboards.core.selectors import live_tiles, shown_tiles
from dashboards.core.services import clean_tags
from dashboards.core.template_library import bundled_templates, validate_layouts
from organizations.models import Membership
from pipelines.query.runner import validate_query
from workspace.api.fields import StrictBooleanField, StrictCharField, StrictUUIDField
from workspace.api.serializers import ModelSerializer, prefetched_attribute
from workspace.models import ActivityLog, acting_person
from workspace.serializers import UserBasicSerializer

# Items of one `tiles` list in a dashboard write; a longer list is a 400 `max_length`.
MAX_TILES_PER_WRITE = 500


def validate_object_or_null(value, what: str):
    if value is not None and not isinstance(value, dict):
        raise serializers.ValidationError(f"{what} must be an object or null.", code="invalid_input")
    return value


class InsightTilesSerializer(serializers.ListSerializer):
    """An insight's tiles on dashboards that are not deleted, by dashboard: the tiles behind its `dashboards`."""

    def related_queryset(self):
        # With each tile's dashboard: who may edit the insight depends on them (InsightSerializer's effective levels).
        return live_tiles().select_related("dashboard")

    def get_attribute(self, instance):
        tiles = instance.__dict__.get(prefetched_attribute("tiles"))
        return self.related_queryset().filter(insight=instance) if tiles is None else tiles


class DashboardTileBasicSerializer(ModelSerializer):
    """A tile that shows the insight: its id, its dashboard's id and whether it was removed (the reference's
    `dashboard_tiles` item, which its generated SDK reads)."""

    dashboard_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = DashboardTile
        list_serializer_class = InsightTilesSerializer
        fields = ["id", "dashboard_id", "deleted"]
        read_only_fields = fields


class InsightListSerializer(serializers.ListSerializer):
    """A page of insights, whose cached results are read in one round trip before the rows are shown."""

    def to_representation(self, data):
        insights = list(data.all() if isinstance(data, models.manager.BaseManager) else data)
        results = self.context.get("insight_results")
        if results is not None:
            results.preload(insights)
        return super().to_representation(insights)


class InsightSerializer(ModelSerializer):
    """An insight (the reference's shape), and the input of create, PATCH and PUT.

    Its result (`result`, `last_refresh`, `is_cached`, ...) is read or computed as the request's `refresh` says
    (dashboards.core.results): a list or a write shows the cached one, a detail GET computes a stale one by default."""

    created_by = UserBasicSerializer(read_only=True)
    last_modified_by = UserBasicSerializer(read_only=True)
    query = serializers.JSONField(required=False, allow_null=True)
    filters = serializers.JSONField(required=False, allow_null=True)
    tags = TagListField(required=False, max_length=MAX_TAGS_PER_DASHBOARD)
    dashboards = DashboardIdsField(required=False)
    dashboard_tiles = DashboardTileBasicSerializer(
        many=True, read_only=True, source="tiles", help_text="The tiles that show the insight, one per dashboard."
    )
    # The reference's insights carry `updated_at` beside `last_modified_at`, and its agent toolkit requires it.
    updated_at = serializers.DateTimeField(source="last_modified_at", read_only=True)
    result = InsightResultJSONField(allow_null=True, help_text="The query's results; null when not computed.")
    hasMore = InsightResultBooleanField(allow_null=True)  # noqa: N815 - the reference's name
    columns = InsightResultListField(child=serializers.CharField(), allow_null=True)
    types = InsightResultListField(child=serializers.JSONField(), allow_null=True)
    last_refresh = InsightResultDateTimeField(allow_null=True, help_text="When the result was computed.")
    next_allowed_client_refresh = InsightResultDateTimeField(allow_null=True)
    is_cached = InsightResultBooleanField(help_text="Whether the result came from the cache.")
    timezone = InsightResultCharField(help_text="The time zone of the result's dates and buckets.")
    error = InsightResultCharField(
        allow_null=True, help_text="Why there is no result: the query cannot be computed as stored."
    )
    effective_restriction_level = serializers.SerializerMethodField(
        help_text="The strictest restriction of the dashboards showing the insight (21 when none restricts it)."
    )
    effective_privilege_level = serializers.SerializerMethodField(
        help_text="37 when the caller may edit the insight (every dashboard showing it), else 21."
    )
    is_sample = serializers.SerializerMethodField(help_text="Always false: no insight here is a sample.")

    class Meta:
        model = Insight
        list_serializer_class = InsightListSerializer
        fields = [
            "id",
            "short_id",
            "name",
            "derived_name",
            "description",
            "query",
            "filters",
            "tags",
            "dashboards",
            "dashboard_tiles",
            "created_at",
            "created_by",
            "last_modified_at",
            "last_modified_by",
            "updated_at",
            "deleted",
            "effective_restriction_level",
            "effective_privilege_level",
            "is_sample",
            *RESULT_FIELDS,
        ]
        read_only_fields = ["id", "short_id", "created_at", "created_by", "last_modified_at", "last_modified_by"]

    def _dashboards(self, insight: Insight) -> list[Dashboard]:
        """The dashboards showing the insight, from the tiles `dashboard_tiles` shows (one prefetch for both)."""
        return [tile.dashboard for tile in self.fields["dashboard_tiles"].get_attribute(insight)]

    @extend_schema_field(RestrictionLevelField())
    def get_effective_restriction_level(self, insight: Insight) -> int:
        levels = [dashboard.restriction_level for dashboard in self._dashboards(insight)]
        return max(levels, default=RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT)

    @extend_schema_field(RestrictionLevelField())
    def get_effective_privilege_level(self, insight: Insight) -> int:
        view = self.context.get("view")
        dashboards = self._dashboards(insight)
        if view is None or all(
            can_edit(dashboard, view.request.user, view.membership_level, collaborating=self._collaborating)
            for dashboard in dashboards
        ):
            return RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
        return RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT

    def _collaborating(self, dashboard: Dashboard) -> bool:
        """Whether the caller collaborates on `dashboard`: the caller's collaborations in the project, read once per
        answer and only when a restricted dashboard asks."""
        view = self.context["view"]
        if "collaborating" not in self.context:
            self.context["collaborating"] = set(
                DashboardCollaborator.objects.filter(
                    user=acting_person(view.request.user), dashboard__project=view.project
                ).values_list("dashboard_id", flat=True)
            )
        return dashboard.pk in self.context["collaborating"]

    @extend_schema_field(serializers.BooleanField())
    def get_is_sample(self, insight: Insight) -> bool:
        return False

    def validate_tags(self, value: list[str]) -> list[str]:
        return clean_tags(value)

    def validate_query(self, value):
        value = validate_object_or_null(value, "The query")
        if value is not None:
            # What the query layer would refuse is refused now, naming the path as /query/ does (QueryError, a 400).
            validate_query(project=self.context["view"].project, query=value)
        return value

    def validate_filters(self, value):
        return validate_object_or_null(value, "Filters")

    def validate_dashboards(self, value: list[int]) -> list[Dashboard]:
        wanted = list(dict.fromkeys(value))
        ids = [dashboard_id for dashboard_id in wanted if 0 < dashboard_id <= MAX_ID]  # beyond it, no row's id
        found = Dashboard.objects.filter(project=self.context["view"].project, deleted=False, pk__in=ids).in_bulk()
        for dashboard_id in wanted:
            if dashboard_id not in found:
                raise serializers.ValidationError(f"No dashboard {dashboard_id} in this project.", code="invalid_input")
        return [found[dashboard_id] for dashboard_id in wanted]

    def validate(self, attrs: dict) -> dict:
        if self.instance is None:
            # A new insight is never deleted; on create the field is ignored like a read-only one.
            attrs.pop("deleted", None)
        return attrs


class TextSerializer(ModelSerializer):
    """The text of a text tile; as input, only `body` counts."""

    created_by = UserBasicSerializer(read_only=True)
    body = StrictCharField(max_length=MAX_TEXT_BODY, allow_blank=True, trim_whitespace=False)

    class Meta:
        model = Text
        fields = ["id", "body", "created_by", "last_modified_at"]
        read_only_fields = ["id", "created_by", "last_modified_at"]


class ShownTilesSerializer(serializers.ListSerializer):
    """A dashboard's tiles: those it shows, in order, never removed ones. Their insights' results are those of the
    dashboard's filters (dashboards.core.results.effective_query), never the insights' own."""

    def related_queryset(self):
        return shown_tiles()

    def get_attribute(self, instance):
        if "tiles" in getattr(instance, "_prefetched_objects_cache", {}):
            return instance.tiles.all()
        tiles = list(shown_tiles().filter(dashboard=instance))
        for tile in tiles:  # as a prefetch leaves them: each knows its dashboard without a query
            DashboardTile.dashboard.field.set_cached_value(tile, instance)
        return tiles

    def to_representation(self, data):
        tiles = list(data.all() if isinstance(data, models.manager.BaseManager) else data)
        results = self.context.get("insight_results")
        if results is None or not tiles or not DashboardTile.dashboard.field.is_cached(tiles[0]):
            return super().to_representation(tiles)
        # The tiles' insights read their results from the context: for their representation, the dashboard's.
        self.context["insight_results"] = results.for_dashboard(tiles[0].dashboard)
        try:
            self.context["insight_results"].preload(tile.insight for tile in tiles)  # cached ones in one round trip
            return super().to_representation(tiles)
        finally:
            self.context["insight_results"] = results


class InsightQuerySerializer(InsightSerializer):
    """An insight's query and its result, without the rest of the insight: what running a saved insight answers."""

    class Meta(InsightSerializer.Meta):
        fields = ["id", "short_id", "name", "query", *RESULT_FIELDS]
        read_only_fields = fields


class DashboardTileSerializer(ModelSerializer):
    """A tile in the reference's shape: exactly one of `insight` and `text` is set.

    As an item of `tiles` in a dashboard write: with `id` it changes that tile (`layouts`, `color`, the text's
    `body`) or removes it (`deleted: true`); without `id` it adds a text tile (`text: {"body": ...}`). Insights
    join dashboards through their own `dashboards`.
    """

    id = serializers.IntegerField(required=False)
    layouts = serializers.JSONField(required=False)
    color = StrictCharField(max_length=32, required=False, allow_null=True, allow_blank=True)
    insight = InsightSerializer(read_only=True, allow_null=True)
    text = TextSerializer(required=False, allow_null=True)
    deleted = StrictBooleanField(required=False)

    class Meta:
        model = DashboardTile
        list_serializer_class = ShownTilesSerializer
        fields = ["id", "layouts", "color", "order", "insight", "text", "deleted"]
        read_only_fields = ["order"]

    def validate_layouts(self, value):
        message = validate_layouts(value)
        if message:
            raise serializers.ValidationError(message, code="invalid_input")
        return value

    def validate(self, attrs: dict) -> dict:
        if attrs.get("id") is None:
            text = attrs.get("text")
            if text is None:
                raise serializers.ValidationError(
                    {"text": [ErrorDetail('A new tile needs a text: {"body": "..."}.', "required")]}
                )
            if "body" not in text:  # a PATCH makes every nested field optional; a new text still needs its body
                raise serializers.ValidationError(
                    {"text": {"body": [ErrorDetail("This field is required.", "required")]}}
                )
        return attrs


class DashboardBasicSerializer(ModelSerializer):
    """The list shape: no tiles, filters or write-only inputs."""

    created_by = UserBasicSerializer(read_only=True)
    is_shared = StrictBooleanField(read_only=True)
    tags = TagListField(read_only=True)
    restriction_level = RestrictionLevelField(read_only=True)
    effective_restriction_level = RestrictionLevelField(source="restriction_level", read_only=True)
    effective_privilege_level = serializers.SerializerMethodField()

    class Meta:
        model = Dashboard
        fields = [
            "id",
            "name",
            "description",
            "pinned",
            "created_at",
            "created_by",
            "is_shared",
            "deleted",
            "creation_mode",
            "tags",
            "restriction_level",
            "effective_restriction_level",
            "effective_privilege_level",
        ]
        read_only_fields = fields

    @extend_schema_field(RestrictionLevelField())
    def get_effective_privilege_level(self, dashboard: Dashboard) -> int:
        view = self.context["view"]
        if can_edit(dashboard, view.request.user, view.membership_level):
            return RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
        return RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT


class DashboardSerializer(DashboardBasicSerializer):
    """The single-dashboard shape, and the input of create and PATCH."""

    tags = TagListField(required=False, max_length=MAX_TAGS_PER_DASHBOARD)
    restriction_level = RestrictionLevelField(required=False)
    filters = serializers.JSONField(required=False, allow_null=True)
    use_template = TemplateNameField(write_only=True, required=False, allow_blank=True)
    use_dashboard = serializers.IntegerField(write_only=True, required=False, allow_null=True)
    duplicate_tiles = StrictBooleanField(
        write_only=True,
        required=False,
        default=False,
        help_text="With use_dashboard: give the copy its own copies of the insights instead of sharing them.",
    )
    delete_insights = StrictBooleanField(write_only=True, required=False, default=False)
    tiles = DashboardTileSerializer(many=True, required=False, max_length=MAX_TILES_PER_WRITE)

    class Meta(DashboardBasicSerializer.Meta):
        fields = [
            *DashboardBasicSerializer.Meta.fields,
            "use_template",
            "use_dashboard",
            "duplicate_tiles",
            "delete_insights",
            "filters",
            "tiles",
        ]
        read_only_fields = [
            "id",
            "created_at",
            "created_by",
            "is_shared",
            "creation_mode",
            "effective_restriction_level",
            "effective_privilege_level",
        ]
        extra_kwargs = {"name": {"required": False}}

    def validate_tags(self, value: list[str]) -> list[str]:
        return clean_tags(value)

    def validate_filters(self, value):
        return validate_object_or_null(value, "Filters")

    def validate_use_template(self, value: str) -> dict | None:
        if not value:
            return None
        templates = bundled_templates()
        if value not in templates:
            raise serializers.ValidationError(
                f"Unknown template '{value}'. Available templates: {', '.join(sorted(templates))}.",
                code="invalid_input",
            )
        return templates[value]

    def validate_use_dashboard(self, value: int | None) -> Dashboard | None:
        if value is None:
            return None
        source = (
            Dashboard.objects.filter(project=self.context["view"].project, deleted=False, pk=value)
            .prefetch_related("tag_rows")
            .first()
        )
        if source is None:
            raise serializers.ValidationError(f"No dashboard {value} in this project.", code="invalid_input")
        return source

    def validate(self, attrs: dict) -> dict:
        if self.instance is None:
            # Only an existing dashboard is deleted or restored; on create the field is ignored like a read-only one.
            attrs.pop("deleted", None)
        if attrs.get("use_template") and attrs.get("use_dashboard"):
            raise serializers.ValidationError(
                {"use_dashboard": [ErrorDetail("Use either use_template or use_dashboard, not both.", "invalid_input")]}
            )
        return attrs


class DashboardVersionSerializer(ModelSerializer):
    """A version of a dashboard: the activity entry of one change, with the fields it changed."""

    id = serializers.UUIDField(source="uuid", read_only=True)
    user = UserBasicSerializer(read_only=True, allow_null=True)
    changes = VersionChangesField()

    class Meta:
        model = ActivityLog
        fields = ["id", "created_at", "user", "activity", "changes"]
        read_only_fields = fields


class DashboardCollaboratorSerializer(ModelSerializer):
    """A collaborator; on create `user_uuid` names a member of the organization and `level` must be 37."""

    user = UserBasicSerializer(read_only=True)
    level = RestrictionLevelField()
    user_uuid = StrictUUIDField(write_only=True)

    class Meta:
        model = DashboardCollaborator
        fields = ["id", "dashboard_id", "user", "level", "added_at", "updated_at", "user_uuid"]
        read_only_fields = ["id", "dashboard_id", "user", "added_at", "updated_at"]

    def validate_level(self, value: int) -> int:
        if value != RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT:
            raise serializers.ValidationError(
                "Collaborators always have level 37 (can edit); 21 is what every project member has.",
                code="invalid_input",
            )
        return value

    def validate(self, attrs: dict) -> dict:
        dashboard = self.context["dashboard"]
        if dashboard.restriction_level != RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT:
            raise serializers.ValidationError(
                "Collaborators can only be added to a dashboard restricted to collaborators (restriction_level 37).",
                code="invalid_input",
            )
        membership = (
            Membership.objects.select_related("user")
            .filter(organization_id=dashboard.project.organization_id, user__uuid=attrs["user_uuid"])
            .first()
        )
        if membership is None:
            raise _user_uuid_error("This user is not a member of the dashboard's organization.")
        if membership.user_id == dashboard.created_by_id:
            raise _user_uuid_error("The dashboard's creator can always edit it and cannot be a collaborator.")
        if membership.level >= Membership.Level.ADMIN:
            raise _user_uuid_error("Organization admins and owners can always edit it and cannot be collaborators.")
        # A duplicate is refused by the unique constraint, in the service (even between two requests).
        attrs["user"] = membership.user
        return attrs


def _user_uuid_error(message: str, code: str = "invalid_input") -> serializers.ValidationError:
    return serializers.ValidationError({"user_uuid": [ErrorDetail(message, code)]})
