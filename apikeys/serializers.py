from rest_framework import serializers

from apikeys.models import PersonalAPIKey


class PersonalAPIKeySerializer(serializers.ModelSerializer):
    """A key as its holder may see it: never its value or digest."""

    class Meta:
        model = PersonalAPIKey
        fields = [
            "id",
            "label",
            "mask_value",
            "scopes",
            "scoped_organizations",
            "created_at",
            "last_used_at",
            "expires_at",
        ]
        read_only_fields = fields
