from workspace.api.serializers import ModelSerializer
from workspace.models import ActivityLog, User


class UserBasicSerializer(ModelSerializer):
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


class ActivityLogSerializer(ModelSerializer):
    """One entry of the activity log: who changed what, with which key, and the changed fields before and after."""

    user = UserBasicSerializer(read_only=True)

    class Meta:
        model = ActivityLog
        fields = [
            "id",
            "created_at",
            "user",
            "api_key_mask",
            "api_key_label",
            "organization_id",
            "project_id",
            "scope",
            "item_id",
            "activity",
            "detail",
        ]
        read_only_fields = fields
