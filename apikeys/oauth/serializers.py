from rest_framework import serializers

from apikeys.oauth.models import ConnectedApp
from workspace.api.serializers import ModelSerializer


class ConnectedOrganizationSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    name = serializers.CharField(read_only=True)


class ConnectedProjectSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(read_only=True)


class ConnectedAppSerializer(ModelSerializer):
    """An app a person let act for them: which one, in which organization and project, with which scopes. Never a
    token."""

    id = serializers.UUIDField(source="uuid", read_only=True)
    app_name = serializers.CharField(read_only=True)
    client_id = serializers.CharField(source="application.client_id", read_only=True)
    organization = ConnectedOrganizationSerializer(read_only=True)
    project = ConnectedProjectSerializer(read_only=True)

    class Meta:
        model = ConnectedApp
        fields = [
            "id",
            "app_name",
            "client_id",
            "scopes",
            "resource",
            "organization",
            "project",
            "created_at",
            "last_used_at",
        ]
        read_only_fields = fields
