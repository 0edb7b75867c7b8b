import re
import uuid
from collections.abc import Callable
from zoneinfo import available_timezones

from django.core.validators import RegexValidator
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from organizations.models import Domain, Invite, Membership, Organization, Project, validate_time_zone
from organizations.tenancy import visible_organizations, visible_projects
from workspace.api.fields import StrictBooleanField, StrictCharField, StrictEmailField, StrictIntegerChoiceField
from workspace.api.serializers import ModelSerializer
from workspace.serializers import UserBasicSerializer

MAX_BULK_INVITES = 20


class TeamSerializer(ModelSerializer):
    """A project as listed in an organization's `teams`, by id (the model's ordering)."""

    class Meta:
        model = Project
        fields = ["id", "uuid", "name", "created_at"]
        read_only_fields = fields


class OrganizationSerializer(ModelSerializer):
    """An organization as its members see it. `membership_level` (organizations.tenancy.visible_organizations) and
    `member_count` (organizations.selectors.with_member_count) are annotations of the viewset's queryset."""

    membership_level = serializers.IntegerField(read_only=True, allow_null=True)
    teams = TeamSerializer(source="projects", many=True, read_only=True)
    available_features = serializers.ListField(child=StrictCharField(), read_only=True)
    # The contract types member_count as a string; it counts active members.
    member_count = serializers.CharField(read_only=True)

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
            "allow_publicly_shared_resources",
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


@extend_schema_field({"type": "string", "enum": sorted(available_timezones())})
class TimeZoneField(StrictCharField):
    """An IANA time zone name; the schema lists every one this installation knows."""


class ProjectSerializer(ModelSerializer):
    """A project of an organization: its name, time zone and the `api_token` its events are captured with; the
    input of create (a name), PATCH and PUT."""

    organization = serializers.UUIDField(source="organization_id", read_only=True)
    timezone = TimeZoneField(source="time_zone", required=False, max_length=64, validators=[validate_time_zone])

    class Meta:
        model = Project
        fields = ["id", "uuid", "organization", "name", "timezone", "api_token", "created_at", "updated_at"]
        read_only_fields = ["id", "uuid", "organization", "api_token", "created_at", "updated_at"]


class LevelField(StrictIntegerChoiceField):
    """A membership level: the integer 1, 8 or 15 only."""

    def __init__(self, **kwargs):
        super().__init__(choices=Membership.Level.choices, **kwargs)


# Named as in the reference API, so that clients generated from it find the same components.
@extend_schema_serializer(component_name="OrganizationMember")
class MemberSerializer(ModelSerializer):
    """A membership as the members list shows it; `id` is the membership's UUID."""

    user = UserBasicSerializer(read_only=True)
    level = LevelField()
    is_2fa_enabled = StrictBooleanField(source="user.is_2fa_enabled", read_only=True)
    has_social_auth = StrictBooleanField(source="user.has_social_auth", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "user", "level", "joined_at", "updated_at", "is_2fa_enabled", "has_social_auth"]
        read_only_fields = ["id", "user", "joined_at", "updated_at", "is_2fa_enabled", "has_social_auth"]


# Named as in the reference API, so that clients generated from it find the same components.
@extend_schema_serializer(component_name="OrganizationInvite")
class InviteSerializer(ModelSerializer):
    """An invite. The level, membership and replacement rules need the organization, so they live in the service."""

    target_email = StrictEmailField(max_length=254)
    level = LevelField(required=False, default=Membership.Level.MEMBER)
    message = StrictCharField(required=False, allow_null=True, allow_blank=True)
    created_by = UserBasicSerializer(read_only=True)
    is_expired = StrictBooleanField(read_only=True)

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
class DomainSerializer(ModelSerializer):
    """A domain. `jit_provisioning_enabled` and `sso_enforcement` can only be turned on once it is verified."""

    # The pattern is published in the schema; validate_domain then lowercases and checks DOMAIN_PATTERN.
    domain = StrictCharField(
        max_length=128,
        validators=[
            RegexValidator(
                r"^([A-Za-z0-9]+(-[A-Za-z0-9]+)*\.)+[A-Za-z]{2,}$", "Enter a domain name such as example.com."
            )
        ],
    )
    sso_enforcement = serializers.ChoiceField(choices=Domain.SSOEnforcement.choices, required=False)
    is_verified = StrictBooleanField(read_only=True)
    has_saml = StrictBooleanField(read_only=True)

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
        # Global uniqueness is the unique index's to decide (organizations.services), even between two requests.
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


class UserOrganizationSerializer(serializers.Serializer):
    """An organization as `users/@me` lists it, from the caller's membership in it."""

    id = serializers.UUIDField(source="organization.id")
    name = StrictCharField(source="organization.name")
    slug = StrictCharField(source="organization.slug")
    membership_level = serializers.IntegerField(source="level")


class UserProjectSerializer(serializers.Serializer):
    """A project as `users/@me` shows it (`team` and `teams`, as the reference API calls projects)."""

    id = serializers.IntegerField()
    uuid = serializers.UUIDField()
    organization = serializers.UUIDField(source="organization_id")
    name = StrictCharField()
    api_token = serializers.CharField()


def parse_integer(value) -> int:
    """A JSON integer, or a string of one (the reference's clients send either)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(value)
    return int(value)


def parse_uuid(value) -> uuid.UUID:
    if not isinstance(value, str):
        raise TypeError(value)
    return uuid.UUID(value)


class VisibleRecordField(serializers.Field):
    """The id of a record the request may see, validated into that record (a 400 for any other id).

    A subclass names the kind of record, how its id is read, and the tenancy selector that says what is visible.
    """

    kind: str
    parse: Callable[[object], object]  # the id from the body; TypeError or ValueError when it is malformed
    lookup: Callable[[object], QuerySet]  # the request's visible records of this kind
    default_error_messages = {
        "invalid": "Give the id of one of your {kind}s.",
        "not_found": "You have no {kind} with this id.",
    }

    def to_internal_value(self, data):
        try:
            pk = self.parse(data)
        except (TypeError, ValueError):
            self.fail("invalid", kind=self.kind)
        record = self.lookup(self.context["request"]).filter(pk=pk).first()
        if record is None:
            self.fail("not_found", kind=self.kind)
        return record

    def to_representation(self, value):
        return value.pk


@extend_schema_field(OpenApiTypes.UUID)
class VisibleOrganizationField(VisibleRecordField):
    kind = "organization"
    parse = staticmethod(parse_uuid)
    lookup = staticmethod(visible_organizations)


@extend_schema_field(OpenApiTypes.INT)
class VisibleProjectField(VisibleRecordField):
    kind = "project"
    parse = staticmethod(parse_integer)
    lookup = staticmethod(visible_projects)


class MeSerializer(UserBasicSerializer):
    """`/api/users/@me/`: the caller, their organizations and projects, and what `@current` means for them.

    `organization`, `organizations`, `team` and `teams` are in the reference API's shape, so that its clients find
    their ids where they expect them. Only what the request may see is shown: the user's `visible_memberships`
    (prefetched by the view, as which ones depends on the request), each with its organization and its projects by
    id; with a key limited to some organizations, a current organization or project outside them is null.
    `set_current_organization` and `set_current_project` (or the reference's `set_current_team`) take the id of an
    organization or project the request may see (the selectors of `organizations.tenancy`), and are validated into
    those records.
    """

    organization = serializers.SerializerMethodField()
    organizations = UserOrganizationSerializer(source="visible_memberships", many=True, read_only=True)
    team = serializers.SerializerMethodField()
    teams = serializers.SerializerMethodField()
    current_organization_id = serializers.SerializerMethodField()
    current_project_id = serializers.SerializerMethodField()
    # Null, like leaving one out, changes nothing.
    set_current_organization = VisibleOrganizationField(write_only=True, required=False, allow_null=True)
    set_current_project = VisibleProjectField(write_only=True, required=False, allow_null=True)
    # The reference API's name for set_current_project.
    set_current_team = VisibleProjectField(write_only=True, required=False, allow_null=True)

    class Meta(UserBasicSerializer.Meta):
        fields = [
            *UserBasicSerializer.Meta.fields,
            "organization",
            "organizations",
            "team",
            "teams",
            "current_organization_id",
            "current_project_id",
            "set_current_organization",
            "set_current_project",
            "set_current_team",
        ]
        read_only_fields = [
            *UserBasicSerializer.Meta.fields,
            "organization",
            "organizations",
            "team",
            "teams",
            "current_organization_id",
            "current_project_id",
        ]

    def validate(self, attrs):
        organization = attrs.pop("set_current_organization", None)
        project, team = attrs.pop("set_current_project", None), attrs.pop("set_current_team", None)
        if project is not None and team is not None and project.pk != team.pk:
            raise serializers.ValidationError(
                {"set_current_team": [ErrorDetail("Give the same project as set_current_project.", code="invalid")]}
            )
        if organization is not None:
            attrs["set_current_organization"] = organization
        if project or team:
            attrs["set_current_project"] = project or team
        return attrs

    def _visible_membership(self, user):
        return next(
            (row for row in user.visible_memberships if row.organization_id == user.current_organization_id), None
        )

    @extend_schema_field(UserOrganizationSerializer(allow_null=True))
    def get_organization(self, user):
        membership = self._visible_membership(user)
        return UserOrganizationSerializer(membership).data if membership else None

    @extend_schema_field(UserProjectSerializer(allow_null=True))
    def get_team(self, user):
        # The current project is shown when its organization is visible: then it is among the projects listed.
        project = next(
            (
                project
                for row in user.visible_memberships
                for project in row.organization.projects.all()
                if project.pk == user.current_project_id
            ),
            None,
        )
        return UserProjectSerializer(project).data if project else None

    @extend_schema_field(UserProjectSerializer(many=True))
    def get_teams(self, user):
        projects = [project for row in user.visible_memberships for project in row.organization.projects.all()]
        return UserProjectSerializer(projects, many=True).data

    @extend_schema_field({"type": "string", "format": "uuid", "nullable": True})
    def get_current_organization_id(self, user):
        return str(user.current_organization_id) if self._visible_membership(user) else None

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_current_project_id(self, user):
        team = self.get_team(user)
        return team["id"] if team else None
