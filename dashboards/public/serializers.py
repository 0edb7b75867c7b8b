"""The shapes of sharing configurations, their passwords, shared links and embed secrets."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from rest_framework import serializers

from dashboards.core.models import Dashboard, SharingConfiguration, SharingPassword
from dashboards.public.models import MAX_ALLOWED_ORIGINS, ORIGIN_PATTERN, EmbedSecret, normalized_origins
from workspace.api.fields import StrictBooleanField, StrictCharField
from workspace.api.serializers import ModelSerializer
from workspace.serializers import UserBasicSerializer


class SharingPasswordSerializer(ModelSerializer):
    """A password of a protected shared page, as listed: never the password itself, which is shown once."""

    created_by = UserBasicSerializer(read_only=True, allow_null=True)

    class Meta:
        model = SharingPassword
        fields = ["id", "note", "created_at", "created_by"]
        read_only_fields = ["id", "created_at", "created_by"]


class NewSharingPasswordSerializer(SharingPasswordSerializer):
    """`{"note", "raw_password"?}`: a password chosen (at least 8 characters) or, when absent, generated."""

    raw_password = StrictCharField(write_only=True, required=False, min_length=8, max_length=128)

    class Meta(SharingPasswordSerializer.Meta):
        fields = [*SharingPasswordSerializer.Meta.fields, "raw_password"]


class NewSharingPasswordResponseSerializer(SharingPasswordSerializer):
    """A new password as its creation answers it: the password itself, this once."""

    password = serializers.CharField(read_only=True)

    class Meta(SharingPasswordSerializer.Meta):
        fields = [*SharingPasswordSerializer.Meta.fields, "password"]
        read_only_fields = fields


class LiveEnabledField(StrictBooleanField):
    """`enabled` as set, read as whether the page is up: false once `expires_at` has passed."""

    def get_attribute(self, configuration: SharingConfiguration) -> bool:
        return configuration.is_live


class SharedDashboardSerializer(ModelSerializer):
    """The dashboard a shared link shows, as the review of links names it: its id, name and project."""

    class Meta:
        model = Dashboard
        fields = ["id", "name", "project_id"]
        read_only_fields = fields


class SharedLinkSerializer(ModelSerializer):
    """An enabled public link of an organization's dashboard, for review: which dashboard, who turned it on and
    when, until when, and whether it asks for a password."""

    dashboard = SharedDashboardSerializer(read_only=True)
    enabled_by = UserBasicSerializer(read_only=True, allow_null=True)
    is_live = StrictBooleanField(read_only=True, help_text="False once expires_at has passed.")

    class Meta:
        model = SharingConfiguration
        fields = [
            "dashboard",
            "access_token",
            "created_at",
            "enabled_at",
            "enabled_by",
            "expires_at",
            "password_required",
            "is_live",
        ]
        read_only_fields = fields


class SharingConfigurationSerializer(ModelSerializer):
    """A dashboard's public link: on or off, until when, whether it asks for one of its passwords, and whether its
    viewers may pick another date range (how far back)."""

    enabled = LiveEnabledField(required=False)
    share_passwords = SharingPasswordSerializer(source="passwords", many=True, read_only=True)

    class Meta:
        model = SharingConfiguration
        fields = [
            "created_at",
            "enabled",
            "access_token",
            "expires_at",
            "password_required",
            "allow_viewer_date_range",
            "max_lookback_days",
            "share_passwords",
        ]
        read_only_fields = ["created_at", "access_token", "share_passwords"]


class EmbedSecretSerializer(ModelSerializer):
    """An embed secret as listed: its `kid` (the header of the tokens it signs) and the sites that may frame its
    pages; never the secret itself, which is shown once."""

    created_by = UserBasicSerializer(read_only=True, allow_null=True)
    allowed_origins = serializers.ListField(
        # The pattern is published in the schema; validate_allowed_origins then lowercases them.
        child=StrictCharField(
            max_length=300, validators=[RegexValidator(ORIGIN_PATTERN, "Enter an origin such as https://example.com.")]
        ),
        max_length=MAX_ALLOWED_ORIGINS,
        required=False,
        help_text="Sites that may frame the embedded pages, as scheme://host[:port]; none: no site may.",
    )

    class Meta:
        model = EmbedSecret
        fields = ["id", "kid", "name", "allowed_origins", "created_at", "created_by", "rotated_at"]
        read_only_fields = ["id", "kid", "created_at", "created_by", "rotated_at"]

    def validate_allowed_origins(self, value: list[str]) -> list[str]:
        try:
            return normalized_origins(value)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages[0]) from None


class NewEmbedSecretResponseSerializer(EmbedSecretSerializer):
    """An embed secret as its creation or rotation answers it: the secret itself, this once."""

    secret = serializers.CharField(read_only=True, help_text="The HS256 key; shown only in this answer.")

    class Meta(EmbedSecretSerializer.Meta):
        fields = [*EmbedSecretSerializer.Meta.fields, "secret"]
        read_only_fields = fields
