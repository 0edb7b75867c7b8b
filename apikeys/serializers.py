from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apikeys.models import PersonalAPIKey, ProjectSecretKey
from apikeys.scopes import PROJECT_SCOPES, validate_project_scopes
from apikeys.services import ENDPOINT_NAME, clean_endpoint_names
from workspace.api.fields import StrictCharField
from workspace.api.serializers import ModelSerializer
from workspace.serializers import UserBasicSerializer

# The most endpoint names one key may be limited to.
MAX_ENDPOINTS = 100


@extend_schema_field({"type": "string", "enum": list(PROJECT_SCOPES)})
class ProjectScopeField(StrictCharField):
    """One scope of a project's key. The schema lists those a project's key may hold; `validate_scopes` of the
    serializer refuses any other with a 400 naming it."""


@extend_schema_field({"type": "string", "pattern": f"^{ENDPOINT_NAME.pattern}$", "maxLength": 128})
class EndpointNameField(StrictCharField):
    """The name of one of the project's endpoints; checked by `clean_endpoint_names`."""


class PersonalAPIKeySerializer(ModelSerializer):
    """A key as its holder may see it, in the reference API's shape: never its value (always null) or digest.

    `scoped_organizations` is empty for a key that is not limited to some organizations, and `scoped_teams` is always
    empty: keys here are limited by organization, never by project. Both are arrays, never null: the reference's
    agent toolkit reads them as arrays and refuses the key otherwise.
    """

    value = serializers.SerializerMethodField()
    scoped_teams = serializers.SerializerMethodField()
    scoped_organizations = serializers.SerializerMethodField()

    class Meta:
        model = PersonalAPIKey
        fields = [
            "id",
            "label",
            "value",
            "mask_value",
            "scopes",
            "scoped_teams",
            "scoped_organizations",
            "created_at",
            "last_used_at",
            "expires_at",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "string", "nullable": True, "description": "Only ever shown when issued: null."})
    def get_value(self, key: PersonalAPIKey) -> None:
        return None

    @extend_schema_field({"type": "array", "items": {"type": "integer"}})
    def get_scoped_teams(self, key: PersonalAPIKey) -> list[int]:
        return []

    @extend_schema_field({"type": "array", "items": {"type": "string", "format": "uuid"}})
    def get_scoped_organizations(self, key: PersonalAPIKey) -> list[str]:
        return [str(organization_id) for organization_id in key.scoped_organizations]


class ProjectSecretKeySerializer(ModelSerializer):
    """A project's key as its project's admins see it: never its secret (shown once, when issued or rolled) nor its
    digest. `created_by` is who issued it, null once they are deleted (the key works on); `previous_expires_at`, after a
    roll with an overlap, is when the secret it had before stops working."""

    created_by = UserBasicSerializer(read_only=True, allow_null=True)
    scopes = serializers.ListField(
        child=ProjectScopeField(max_length=64),
        max_length=len(PROJECT_SCOPES),
        help_text="`<object>:<read|write>`, at most a project's: not `*`, nor organization, organization_member or "
        "user scopes.",
    )
    endpoints = serializers.ListField(
        child=EndpointNameField(max_length=128),
        max_length=MAX_ENDPOINTS,
        required=False,
        help_text="Names of the project's endpoints the key may reach; empty or absent: all of them.",
    )

    class Meta:
        model = ProjectSecretKey
        fields = [
            "id",
            "label",
            "mask_value",
            "scopes",
            "endpoints",
            "created_at",
            "created_by",
            "last_used_at",
            "rolled_at",
            "previous_expires_at",
        ]
        read_only_fields = ["id", "mask_value", "created_at", "created_by", "last_used_at", "rolled_at"]
        extra_kwargs = {"previous_expires_at": {"read_only": True}}

    def validate_scopes(self, value: list[str]) -> list[str]:
        try:
            return validate_project_scopes(value)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages[0]) from None

    def validate_endpoints(self, value: list[str]) -> list[str]:
        try:
            return clean_endpoint_names(value)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict["endpoints"][0]) from None


class NewProjectSecretKeyResponseSerializer(ProjectSecretKeySerializer):
    """A project's key as its issue or its roll answers it: with the secret itself, this once."""

    key = serializers.CharField(read_only=True, help_text="The secret key (`phs_...`); shown only in this answer.")

    class Meta(ProjectSecretKeySerializer.Meta):
        fields = [*ProjectSecretKeySerializer.Meta.fields, "key"]
        read_only_fields = fields


class ProjectSecretKeyRollSerializer(serializers.Serializer):
    """How long the secret being replaced keeps working."""

    overlap_seconds = serializers.IntegerField(
        min_value=0,
        max_value=settings.PROJECT_KEY_MAX_OVERLAP_SECONDS,
        default=0,
        help_text="Seconds the previous secret stays valid beside the new one (at most a day); 0: it stops at once.",
    )
