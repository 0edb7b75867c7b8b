from types import SimpleNamespace

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from dashboards.detail import TEXT_COLUMNS, TILE_COLUMNS, TILE_USERS
from dashboards.models import (
    MAX_TAGS_PER_DASHBOARD,
    MAX_TEXT_BODY,
    Dashboard,
    DashboardCollaborator,
    DashboardTile,
    Insight,
    RestrictionLevel,
    SharingConfiguration,
    Text,
)
from dashboards.permissions import can_edit
from dashboards.selectors import CREATOR_COLUMNS, INSIGHT_PAGE_COLUMNS, names_list, shown_tiles
from dashboards.services import clean_tags
from dashboards.template_library import TemplateError, bundled_templates, validate_layouts, validate_template
from organizations.models import Membership
from workspace.api.fields import StrictBooleanField, StrictCharField, StrictIntegerChoiceField
from workspace.api.serializers import ModelSerializer, readable_field_names, represent_rows, representer
from workspace.serializers import UserBasicSerializer


class RestrictionLevelField(StrictIntegerChoiceField):
    """21 or 37; one enum in the schema, `DashboardRestrictionLevel`, whatever the field is called."""

    def __init__(self, **kwargs):
        super().__init__(choices=RestrictionLevel.choices, **kwargs)


class TagListField(serializers.ListField):
    """Tags are stored one row each; read them from the prefetched rows, write them as a list of strings."""

    child = StrictCharField(max_length=128)

    def get_attribute(self, instance):
        return instance.tag_names

    def to_internal_value(self, data):
        # Refuse an over-long list before validating each of its items.
        if self.max_length is not None and isinstance(data, list) and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


# Items of one `tiles` list in a dashboard write; a longer list is a 400 `max_length`.
MAX_TILES_PER_WRITE = 500


def validate_object_or_null(value, what: str):
    if value is not None and not isinstance(value, dict):
        raise serializers.ValidationError(f"{what} must be an object or null.", code="invalid_input")
    return value


@extend_schema_field({"type": "array", "items": {"type": "integer"}})
class DashboardIdsField(serializers.ListField):
    """The ids of the (non-deleted) dashboards showing an insight; as input, the dashboards that should.

    dashboards.permissions.requested_dashboard_ids reads the same list the same way, to check edit rights first."""

    child = serializers.IntegerField()

    def get_attribute(self, instance):
        return instance.dashboard_ids


class InsightSerializer(ModelSerializer):
    """An insight (the reference's shape), and the input of create, PATCH and PUT."""

    created_by = UserBasicSerializer(read_only=True)
    last_modified_by = UserBasicSerializer(read_only=True)
    query = serializers.JSONField(required=False, allow_null=True)
    filters = serializers.JSONField(required=False, allow_null=True)
    tags = TagListField(required=False, max_length=MAX_TAGS_PER_DASHBOARD)
    dashboards = DashboardIdsField(required=False)
    # The reference's insights carry `updated_at` beside `last_modified_at`, and its agent toolkit requires it.
    updated_at = serializers.DateTimeField(source="last_modified_at", read_only=True)

    class Meta:
        model = Insight
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
            "created_at",
            "created_by",
            "last_modified_at",
            "last_modified_by",
            "updated_at",
            "deleted",
        ]
        read_only_fields = ["id", "short_id", "created_at", "created_by", "last_modified_at", "last_modified_by"]

    def represent_page(self, rows: list[dict]) -> list[dict]:
        """A list page from `dashboards.selectors.insight_page_rows`, as `.data` of the instances would be, without
        a serializer or model instances per insight (see workspace.api.serializers.represent_rows)."""
        users = represent_users(representer(UserBasicSerializer), rows, ("created_by", "last_modified_by"))
        for row in rows:
            row["created_by"] = users.get(row["created_by_id"])
            row["last_modified_by"] = users.get(row["last_modified_by_id"])
            row["tags"] = names_list(row["tag_names"])
            row["dashboards"] = names_list(row["dashboard_ids"])
            row["updated_at"] = None  # the same field as last_modified_at: copied once represented
        ready = frozenset({"created_by", "last_modified_by", "tags", "dashboards", "updated_at"})
        items = represent_rows(self, rows, ready=ready)
        for item in items:
            item["updated_at"] = item["last_modified_at"]
        return items

    def validate_tags(self, value: list[str]) -> list[str]:
        return clean_tags(value)

    def validate_query(self, value):
        return validate_object_or_null(value, "The query")

    def validate_filters(self, value):
        return validate_object_or_null(value, "Filters")

    def validate_dashboards(self, value: list[int]) -> list[Dashboard]:
        wanted = list(dict.fromkeys(value))
        found = Dashboard.objects.filter(project=self.context["view"].project, deleted=False, pk__in=wanted).in_bulk()
        for dashboard_id in wanted:
            if dashboard_id not in found:
                raise serializers.ValidationError(f"No dashboard {dashboard_id} in this project.", code="invalid_input")
        return [found[dashboard_id] for dashboard_id in wanted]

    def validate(self, attrs: dict) -> dict:
        if self.instance is None:
            # A new insight is never deleted; on create the field is ignored like a read-only one.
            attrs.pop("deleted", None)
        return attrs


def represent_users(serializer: UserBasicSerializer, rows: list[dict], users: tuple[str, ...]) -> dict[int, dict]:
    """The users that `rows` name, each represented once by `serializer`, by id: for each name in `users`, a row
    holds the user's id as `<name>_id` and the user's columns as `<name>__<field>` (None for no user)."""
    names = readable_field_names(serializer)
    found = {}
    for row in rows:
        for user in users:
            user_id = row[f"{user}_id"]
            if user_id is not None and user_id not in found:
                found[user_id] = {name: row[f"{user}__{name}"] for name in names}
    return dict(zip(found, represent_rows(serializer, found.values()), strict=True))


class TextSerializer(ModelSerializer):
    """The text of a text tile; as input, only `body` counts."""

    created_by = UserBasicSerializer(read_only=True)
    body = StrictCharField(max_length=MAX_TEXT_BODY, allow_blank=True, trim_whitespace=False)

    class Meta:
        model = Text
        fields = ["id", "body", "created_by", "last_modified_at"]
        read_only_fields = ["id", "created_by", "last_modified_at"]


class ShownTilesSerializer(serializers.ListSerializer):
    """A dashboard's tiles: those it shows (prefetched by the view, see dashboards.selectors), never removed ones."""

    def get_attribute(self, instance):
        if "tiles" in getattr(instance, "_prefetched_objects_cache", {}):
            return instance.tiles.all()
        return shown_tiles().filter(dashboard=instance)


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

    def represent_page(self, rows: list[dict], *, ready: frozenset[str] = frozenset()) -> list[dict]:
        """A list page from `dashboards.selectors.dashboard_page_rows`, as `.data` of the instances would be,
        without a serializer or model instances per dashboard (see workspace.api.serializers.represent_rows); the
        fields named in `ready` are in the rows already represented."""
        creators = represent_users(representer(UserBasicSerializer), rows, ("created_by",))
        for row in rows:
            creator_id = row["created_by_id"]
            row["created_by"] = creators.get(creator_id)
            row["tags"] = names_list(row["tags"])
            row["effective_restriction_level"] = row["restriction_level"]
            # The rule of can_edit, on a stand-in holding what it reads.
            stand_in = SimpleNamespace(
                pk=row["id"],
                restriction_level=row["restriction_level"],
                created_by_id=creator_id,
                caller_is_collaborator=row["caller_is_collaborator"],
            )
            row["effective_privilege_level"] = self.get_effective_privilege_level(stand_in)
        return represent_rows(self, rows, ready=frozenset({"created_by", "effective_privilege_level"}) | ready)

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
    use_template = StrictCharField(write_only=True, required=False, allow_blank=True)
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

    def represent_detail(self, row: dict, tile_rows: list[dict]) -> dict:
        """The detail from `dashboards.detail.dashboard_detail_rows` (the dashboard's row and its tiles' rows), as
        `.data` of the instance would be, without model instances or a serializer per tile (see `represent_page`)."""
        users = represent_users(representer(UserBasicSerializer), tile_rows, TILE_USERS)
        insight_rows, text_rows = [], []
        for tile in tile_rows:
            if tile["insight_id"] is not None:
                insight_rows.append(
                    {
                        **{column: tile[f"insight__{column}"] for column in INSIGHT_PAGE_COLUMNS},
                        "tag_names": tile["insight_tag_names"],
                        "dashboard_ids": tile["insight_dashboard_ids"],
                        **{f"{user}__{column}": tile[f"insight__{user}__{column}"] for user, column in _INSIGHT_USERS},
                    }
                )
            if tile["text_id"] is not None:
                text = {column: tile[f"text__{column}"] for column in TEXT_COLUMNS}
                text["created_by"] = users.get(tile["text__created_by_id"])
                text_rows.append(text)
        insights = iter(representer(InsightSerializer).represent_page(insight_rows))
        texts = iter(represent_rows(representer(TextSerializer), text_rows, ready=frozenset({"created_by"})))
        tiles = [
            {
                **{column: tile[column] for column in TILE_COLUMNS},
                "insight": None if tile["insight_id"] is None else next(insights),
                "text": None if tile["text_id"] is None else next(texts),
            }
            for tile in tile_rows
        ]
        row["tiles"] = represent_rows(representer(DashboardTileSerializer), tiles, ready=frozenset({"insight", "text"}))
        [item] = self.represent_page([row], ready=frozenset({"tiles"}))
        return item

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


# The users of an insight, as InsightSerializer.represent_page reads them, with each of their columns.
_INSIGHT_USERS = [(user, column) for user in ("created_by", "last_modified_by") for column in CREATOR_COLUMNS]


class TileReferenceSerializer(serializers.Serializer):
    id = serializers.IntegerField()


class MoveTileSerializer(serializers.Serializer):
    """`{"tile": {"id": N}, "toDashboard": M}`, the reference API's spelling."""

    tile = TileReferenceSerializer()
    toDashboard = serializers.IntegerField()  # noqa: N815 - the field name is part of the contract


class TemplateJSONSerializer(serializers.Serializer):
    """`{"template": {...}}` checked against dashboards.template_library.TEMPLATE_SCHEMA."""

    template = serializers.JSONField()

    def validate_template(self, value) -> dict:
        try:
            return validate_template(value)
        except TemplateError as error:
            code = {"required": "required", "maxItems": "max_length", "maxLength": "max_length"}.get(
                error.keyword, "invalid_input"
            )
            detail = [ErrorDetail(error.message, code)]
            for part in reversed(error.path):
                detail = {part: detail}
            raise serializers.ValidationError(detail) from error


class DashboardCollaboratorSerializer(ModelSerializer):
    """A collaborator; on create `user_uuid` names a member of the organization and `level` must be 37."""

    user = UserBasicSerializer(read_only=True)
    level = RestrictionLevelField()
    user_uuid = serializers.UUIDField(write_only=True)

    class Meta:
        model = DashboardCollaborator
        fields = ["id", "dashboard_id", "user", "level", "added_at", "updated_at", "user_uuid"]
        read_only_fields = ["id", "dashboard_id", "user", "added_at", "updated_at"]

    def represent_list(self, rows: list[dict]) -> list[dict]:
        """The collaborators from `dashboards.detail.dashboard_collaborator_rows`, as `.data` of the instances would
        be, without a serializer or model instance per collaborator (see workspace.api.serializers.represent_rows)."""
        users = represent_users(representer(UserBasicSerializer), rows, ("user",))
        for row in rows:
            row["user"] = users.get(row["user_id"])
        return represent_rows(self, rows, ready=frozenset({"user"}))

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


class SharingConfigurationSerializer(ModelSerializer):
    """A dashboard's public link: `enabled` is the one field a client sets."""

    class Meta:
        model = SharingConfiguration
        fields = ["created_at", "enabled", "access_token"]
        read_only_fields = ["created_at", "access_token"]
