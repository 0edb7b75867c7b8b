import re

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from organizations.models import Domain, Invite, Membership, Organization, Project
from workspace.api.fields import StrictIntegerChoiceField
from workspace.serializers import UserBasicSerializer

MAX_BULK_INVITES = 20


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


class LevelField(StrictIntegerChoiceField):
    """A membership level: the integer 1, 8 or 15 only."""

    def __init__(self, **kwargs):
        super().__init__(choices=Membership.Level.choices, **kwargs)


# Named as in the reference API, so that clients generated from it find the same components.
@extend_schema_serializer(component_name="OrganizationMember")
class MemberSerializer(serializers.ModelSerializer):
    """A membership as the members list shows it; `id` is the membership's UUID."""

    user = UserBasicSerializer(read_only=True)
    level = LevelField()
    is_2fa_enabled = serializers.BooleanField(source="user.is_2fa_enabled", read_only=True)
    has_social_auth = serializers.BooleanField(source="user.has_social_auth", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "user", "level", "joined_at", "updated_at", "is_2fa_enabled", "has_social_auth"]
        read_only_fields = ["id", "user", "joined_at", "updated_at", "is_2fa_enabled", "has_social_auth"]


# Named as in the reference API, so that clients generated from it find the same components.
@extend_schema_serializer(component_name="OrganizationInvite")
class InviteSerializer(serializers.ModelSerializer):
    """An invite. The level, membership and replacement rules need the organization, so they live in the service."""

    target_email = serializers.EmailField(max_length=254)
    level = LevelField(required=False, default=Membership.Level.MEMBER)
    message = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    created_by = UserBasicSerializer(read_only=True)
    is_expired = serializers.BooleanField(read_only=True)

    class Meta:
        model = Invite
        fields = [
            "id",
            "target_email",
            "first_name",
            "emailing_attempt_made",
            "level",
            "is_expired",
            "created_by",
            "created_at",
            "updated_at",
            "message",
        ]
        read_only_fields = ["id", "emailing_attempt_made", "is_expired", "created_by", "created_at", "updated_at"]

    def validate_target_email(self, value: str) -> str:
        return value.strip().lower()


class BulkInviteSerializer(serializers.ListSerializer):
    """Up to 20 invites, validated together; one email appears once."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("child", InviteSerializer())
        kwargs.setdefault("max_length", MAX_BULK_INVITES)
        kwargs.setdefault("allow_empty", False)
        super().__init__(*args, **kwargs)

    def validate(self, attrs):
        emails = [item["target_email"] for item in attrs]
        duplicates = sorted({email for email in emails if emails.count(email) > 1})
        if duplicates:
            raise serializers.ValidationError(
                {"target_email": [ErrorDetail(f"{duplicates[0]} appears more than once.", code="unique")]}
            )
        return attrs


DOMAIN_PATTERN = re.compile(r"^([a-z0-9]+(-[a-z0-9]+)*\.)+[a-z]{2,}$")


# Named as in the reference API, so that clients generated from it find the same components.
@extend_schema_serializer(component_name="OrganizationDomain")
class DomainSerializer(serializers.ModelSerializer):
    """A domain. `jit_provisioning_enabled` and `sso_enforcement` can only be turned on once it is verified."""

    domain = serializers.CharField(max_length=128)
    sso_enforcement = serializers.ChoiceField(choices=Domain.SSOEnforcement.choices, required=False)
    is_verified = serializers.BooleanField(read_only=True)
    has_saml = serializers.BooleanField(read_only=True)

    class Meta:
        model = Domain
        fields = [
            "id",
            "domain",
            "is_verified",
            "verified_at",
            "verification_challenge",
            "jit_provisioning_enabled",
            "sso_enforcement",
            "has_saml",
            "saml_entity_id",
            "saml_acs_url",
            "saml_x509_cert",
        ]
        read_only_fields = ["id", "is_verified", "verified_at", "verification_challenge", "has_saml"]
        extra_kwargs = {
            "saml_entity_id": {"required": False, "allow_null": True, "allow_blank": True},
            "saml_acs_url": {"required": False, "allow_null": True, "allow_blank": True},
            "saml_x509_cert": {"required": False, "allow_null": True, "allow_blank": True},
        }

    def validate_domain(self, value: str) -> str:
        value = value.strip().lower()
        if not DOMAIN_PATTERN.match(value):
            raise serializers.ValidationError("Enter a domain name such as example.com.", code="invalid")
        others = Domain.objects.filter(domain=value)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise serializers.ValidationError("This domain is already registered.", code="unique")
        return value

    def validate(self, attrs):
        # A new name must be proven again, so it counts as unverified.
        verified = (
            self.instance is not None
            and self.instance.is_verified
            and attrs.get("domain", self.instance.domain) == self.instance.domain
        )
        if not verified:
            for field in ("jit_provisioning_enabled", "sso_enforcement"):
                if attrs.get(field):
                    raise serializers.ValidationError(
                        {field: [ErrorDetail("Verify the domain before enabling this.", code="verification_required")]}
                    )
        return attrs
