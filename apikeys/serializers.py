from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apikeys.models import PersonalAPIKey
from workspace.api.serializers import ModelSerializer


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
