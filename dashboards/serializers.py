from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from dashboards.models import Dashboard, DashboardCollaborator, DashboardTile, RestrictionLevel, SharingConfiguration
from dashboards.services import clean_tags
from dashboards.templates import TemplateError, bundled_templates, validate_template
from organizations.models import Membership
from workspace.api.fields import StrictIntegerChoiceField
from workspace.serializers import UserBasicSerializer


class RestrictionLevelField(StrictIntegerChoiceField):
    """21 or 37; one enum in the schema, `DashboardRestrictionLevel`, whatever the field is called."""

    def __init__(self, **kwargs):
        super().__init__(choices=RestrictionLevel.choices, **kwargs)


class TagListField(serializers.ListField):
    """Tags are stored one row each; read them from the prefetched rows, write them as a list of strings."""

    child = serializers.CharField(max_length=128)

    def get_attribute(self, instance):
        return instance.tag_names


class DashboardTileSerializer(serializers.ModelSerializer):
    class Meta:
        model = DashboardTile
        fields = ["id", "type", "name", "description", "query", "filters", "body", "layouts", "color", "order"]
        read_only_fields = fields


class DashboardBasicSerializer(serializers.ModelSerializer):
    """The list shape: no tiles, filters or write-only inputs."""

    created_by = UserBasicSerializer(read_only=True)
    is_shared = serializers.BooleanField(read_only=True)
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
        if self.context["view"].can_edit(dashboard):
            return RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
        return RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT


class DashboardSerializer(DashboardBasicSerializer):
    """The single-dashboard shape, and the input of create and PATCH."""

    tags = TagListField(required=False)
    restriction_level = RestrictionLevelField(required=False)
    filters = serializers.JSONField(required=False, allow_null=True)
    use_template = serializers.CharField(write_only=True, required=False, allow_blank=True)
    use_dashboard = serializers.IntegerField(write_only=True, required=False, allow_null=True)
    delete_insights = serializers.BooleanField(write_only=True, required=False, default=False)
    tiles = DashboardTileSerializer(many=True, read_only=True)

    class Meta(DashboardBasicSerializer.Meta):
        fields = [
            *DashboardBasicSerializer.Meta.fields,
            "use_template",
            "use_dashboard",
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
            "tiles",
        ]
        extra_kwargs = {"name": {"required": False}}

    def validate_tags(self, value: list[str]) -> list[str]:
        return clean_tags(value)

    def validate_filters(self, value):
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("Filters must be an object or null.", code="invalid_input")
        return value

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
            .prefetch_related("tiles", "tag_rows")
            .first()
        )
        if source is None:
            raise serializers.ValidationError(f"No dashboard {value} in this project.", code="invalid_input")
        return source

    def validate(self, attrs: dict) -> dict:
        if attrs.get("use_template") and attrs.get("use_dashboard"):
            raise serializers.ValidationError(
                {"use_dashboard": [ErrorDetail("Use either use_template or use_dashboard, not both.", "invalid_input")]}
            )
        return attrs


class TileReferenceSerializer(serializers.Serializer):
    id = serializers.IntegerField()


class MoveTileSerializer(serializers.Serializer):
    """`{"tile": {"id": N}, "toDashboard": M}`, the reference API's spelling."""

    tile = TileReferenceSerializer()
    toDashboard = serializers.IntegerField()  # noqa: N815 - the field name is part of the contract


class TemplateJSONSerializer(serializers.Serializer):
    """`{"template": {...}}` checked against dashboards.templates.TEMPLATE_SCHEMA."""

    template = serializers.JSONField()

    def validate_template(self, value) -> dict:
        try:
            return validate_template(value)
        except TemplateError as error:
            code = "required" if "required property" in error.message else "invalid_input"
            detail = [ErrorDetail(error.message, code)]
            for part in reversed(error.path):
                detail = {part: detail}
            raise serializers.ValidationError(detail) from error


class DashboardCollaboratorSerializer(serializers.ModelSerializer):
    """A collaborator; on create `user_uuid` names a member of the organization and `level` must be 37."""

    user = UserBasicSerializer(read_only=True)
    level = RestrictionLevelField()
    user_uuid = serializers.UUIDField(write_only=True)

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
        if DashboardCollaborator.objects.filter(dashboard=dashboard, user=membership.user).exists():
            raise _user_uuid_error("This user is already a collaborator on this dashboard.", code="unique")
        attrs["user"] = membership.user
        return attrs


def _user_uuid_error(message: str, code: str = "invalid_input") -> serializers.ValidationError:
    return serializers.ValidationError({"user_uuid": [ErrorDetail(message, code)]})


class SharingConfigurationSerializer(serializers.ModelSerializer):
    class Meta:
        model = SharingConfiguration
        fields = ["created_at", "enabled", "access_token"]
        read_only_fields = fields
