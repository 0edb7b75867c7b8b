from rest_framework import serializers

from workspace.models import User


class UserBasicSerializer(serializers.ModelSerializer):
    """The user as embedded in other records (created_by, member.user, collaborator.user)."""

    class Meta:
        model = User
        fields = [
            "id",
            "uuid",
            "distinct_id",
            "first_name",
            "last_name",
            "email",
            "is_email_verified",
            "hedgehog_config",
        ]
        read_only_fields = fields


class UserOrganizationSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="organization.id")
    name = serializers.CharField(source="organization.name")
    slug = serializers.CharField(source="organization.slug")
    membership_level = serializers.IntegerField(source="level")


class CurrentOrganizationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    slug = serializers.CharField()


class CurrentProjectSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    uuid = serializers.UUIDField()
    name = serializers.CharField()


class MeSerializer(UserBasicSerializer):
    """`/api/users/@me/`: the caller, their organizations and what `@current` means for them.

    `organization` and `team` mirror the reference API so that its clients find their ids where they
    expect them.
    """

    organizations = UserOrganizationSerializer(source="visible_memberships", many=True)
    organization = CurrentOrganizationSerializer(source="current_organization", allow_null=True)
    team = CurrentProjectSerializer(source="current_project", allow_null=True)
    current_organization_id = serializers.UUIDField(allow_null=True)
    current_project_id = serializers.IntegerField(allow_null=True)

    class Meta(UserBasicSerializer.Meta):
        fields = [
            *UserBasicSerializer.Meta.fields,
            "organizations",
            "organization",
            "team",
            "current_organization_id",
            "current_project_id",
        ]
        read_only_fields = fields
