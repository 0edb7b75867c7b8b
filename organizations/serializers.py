from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from organizations.models import Organization, Project


class TeamSerializer(serializers.ModelSerializer):
    """A project as listed in an organization's `teams`."""

    class Meta:
        model = Project
        fields = ["id", "uuid", "name", "created_at"]
        read_only_fields = fields


class OrganizationSerializer(serializers.ModelSerializer):
    """An organization as its members see it; `membership_level` and `member_count` are annotations."""

    membership_level = serializers.IntegerField(read_only=True, allow_null=True)
    teams = TeamSerializer(source="projects", many=True, read_only=True)
    available_features = serializers.ListField(child=serializers.CharField(), read_only=True)
    member_count = serializers.SerializerMethodField()

    class Meta:
        model = Organization
        fields = [
            "id",
            "name",
            "slug",
            "created_at",
            "updated_at",
            "membership_level",
            "plugins_access_level",
            "teams",
            "available_features",
            "available_product_features",
            "is_member_join_email_enabled",
            "metadata",
            "customer_id",
            "enforce_2fa",
            "member_count",
        ]
        read_only_fields = [
            "id",
            "slug",
            "created_at",
            "updated_at",
            "plugins_access_level",
            "available_product_features",
            "metadata",
            "customer_id",
        ]

    @extend_schema_field(OpenApiTypes.STR)
    def get_member_count(self, organization) -> str:
        # The contract types member_count as a string; it counts active members.
        return str(getattr(organization, "member_count", 0) or 0)


class ProjectSerializer(serializers.ModelSerializer):
    organization = serializers.UUIDField(source="organization_id", read_only=True)

    class Meta:
        model = Project
        fields = ["id", "uuid", "organization", "name", "created_at", "updated_at"]
        read_only_fields = ["id", "uuid", "organization", "created_at", "updated_at"]
