"""Writes that touch more than one row of the organizations app."""

import logging

import dns.exception
import dns.resolver
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Count, F, IntegerField, OuterRef, Prefetch, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.text import slugify
from rest_framework.exceptions import ErrorDetail, PermissionDenied, ValidationError

from organizations.models import Domain, Invite, Membership, Organization, Project, new_verification_challenge

logger = logging.getLogger(__name__)

DEFAULT_PROJECT_NAME = "Default project"


def unique_slug(name: str) -> str:
    """A slug from the name, with `-2`, `-3`, ... appended when it is taken."""
    base = slugify(name)[:40].strip("-") or "organization"
    taken = set(Organization.objects.filter(slug__startswith=base).values_list("slug", flat=True))
    if base not in taken:
        return base
    suffix = 2
    while f"{base}-{suffix}" in taken:
        suffix += 1
    return f"{base}-{suffix}"


def organizations_for_user(user, *, scoped_organizations: list[str] | None = None) -> QuerySet[Organization]:
    """Organizations the user belongs to, with the caller's level, active member count and projects.

    Three queries for a page whatever its size: COUNT, the page (level and member count as annotations),
    and the projects prefetch.
    """
    active_members = (
        Membership.objects.filter(organization=OuterRef("pk"), user__is_active=True)
        .order_by()
        .values("organization")
        .annotate(count=Count("pk"))
        .values("count")
    )
    queryset = (
        Organization.objects.filter(memberships__user=user)
        .annotate(
            membership_level=F("memberships__level"),
            member_count=Coalesce(Subquery(active_members, output_field=IntegerField()), Value(0)),
        )
        .prefetch_related(Prefetch("projects", queryset=Project.objects.order_by("id")))
        .order_by("name", "id")
    )
    if scoped_organizations:
        queryset = queryset.filter(id__in=scoped_organizations)
    return queryset


@transaction.atomic
def organization_create(*, user, name: str, **fields) -> Organization:
    """Create an organization with the creator as owner and a "Default project"; make both the user's current."""
    organization = Organization(name=name, slug=unique_slug(name), **fields)
    organization.full_clean()
    organization.save()
    Membership.objects.create(organization=organization, user=user, level=Membership.Level.OWNER)
    project = Project.objects.create(organization=organization, name=DEFAULT_PROJECT_NAME)
    user.current_organization = organization
    user.current_project = project
    user.save(update_fields=["current_organization", "current_project"])
    return organization


@transaction.atomic
def project_create(*, organization: Organization, user, name: str) -> Project:
    project = Project(organization=organization, name=name)
    project.full_clean()
    project.save()
    if user.current_project_id is None:
        user.current_organization = organization
        user.current_project = project
        user.save(update_fields=["current_organization", "current_project"])
    return project


def project_delete(*, project: Project) -> None:
    """Delete a project and everything in it; an organization keeps at least one project."""
    if not Project.objects.filter(organization_id=project.organization_id).exclude(pk=project.pk).exists():
        raise ValidationError(
            "An organization must keep at least one project; delete the organization instead.", code="last_project"
        )
    project.delete()


# Members


def _only_owner(membership: Membership) -> bool:
    """Whether this is the organization's one owner. Locks the owners' rows, so that two owners removing
    or demoting each other at the same moment cannot leave the organization with none."""
    owners = list(
        Membership.objects.select_for_update()
        .filter(organization_id=membership.organization_id, level=Membership.Level.OWNER)
        .values_list("pk", flat=True)
    )
    return owners == [membership.pk]


def check_member_change(*, actor_level: int, actor, target: Membership, new_level: int | None = None) -> None:
    """The level rules for changing (`new_level` given) or removing a member, as 403s.

    Nobody changes their own level, but anybody may leave. Otherwise admins and owners act on members at or
    below their own level; nobody sets a level above their own, and only owners make owners. The last-owner
    rule is a 400 and lives in the write services below.
    """
    if target.user_id == actor.pk:
        if new_level is not None:
            raise PermissionDenied("You can't change your own access level.")
        return
    if actor_level < Membership.Level.ADMIN:
        raise PermissionDenied("Only organization admins and owners can change other members.")
    if target.level > actor_level:
        raise PermissionDenied("You can only change members at or below your own level.")
    if new_level is not None and new_level > actor_level:
        raise PermissionDenied("You can't give a member a level above your own.")
    if new_level == Membership.Level.OWNER and actor_level != Membership.Level.OWNER:
        raise PermissionDenied("Only owners can make other members owners.")


@transaction.atomic
def membership_update_level(*, membership: Membership, level: int) -> Membership:
    """Set a member's level; an organization always keeps at least one owner."""
    membership = Membership.objects.select_related("user").get(pk=membership.pk)
    if level < Membership.Level.OWNER and _only_owner(membership):
        raise ValidationError(
            {"level": [ErrorDetail("The last owner can't be demoted; make someone else an owner first.", "last_owner")]}
        )
    membership.level = level
    membership.save(update_fields=["level", "updated_at"])
    return membership


@transaction.atomic
def membership_delete(*, membership: Membership) -> None:
    """Remove a member (or let them leave). The last owner stays; the user's `@current` no longer points here."""
    membership = Membership.objects.select_related("user").get(pk=membership.pk)
    if _only_owner(membership):
        raise ValidationError(
            "The last owner can't leave or be removed; make someone else an owner first.", code="last_owner"
        )
    user = membership.user
    membership.delete()
    if user.current_organization_id == membership.organization_id:
        user.current_organization = None
        user.current_project = None
        user.save(update_fields=["current_organization", "current_project"])
    elif user.current_project_id is not None and user.current_project.organization_id == membership.organization_id:
        user.current_project = None
        user.save(update_fields=["current_project"])


# Invites


def invites_pending(organization: Organization) -> QuerySet[Invite]:
    """The organization's invites that have not been accepted, newest first."""
    return (
        organization.invites.filter(accepted_at__isnull=True).select_related("created_by").order_by("-created_at", "id")
    )


def check_invite(*, organization: Organization, inviter_level: int, target_email: str, level: int) -> None:
    """Refuse an invite above the inviter's level (403) or for someone already in the organization (400)."""
    if level > inviter_level:
        raise PermissionDenied("You can't invite someone at a level above your own.")
    if Membership.objects.filter(organization=organization, user__email__iexact=target_email).exists():
        raise ValidationError(
            {
                "target_email": [
                    ErrorDetail(f"{target_email} is already a member of this organization.", "already_member")
                ]
            }
        )


def _invite_save(*, organization: Organization, created_by, target_email: str, **fields) -> Invite:
    # A new invite replaces the earlier ones for the same address.
    organization.invites.filter(target_email__iexact=target_email, accepted_at__isnull=True).delete()
    invite = Invite(organization=organization, created_by=created_by, target_email=target_email.lower(), **fields)
    invite.full_clean()
    invite.save()
    return invite


def invite_create(*, organization: Organization, created_by, inviter_level: int, target_email: str, **fields) -> Invite:
    """Create (or replace) an invite, then mail it."""
    return invites_bulk_create(
        organization=organization,
        created_by=created_by,
        inviter_level=inviter_level,
        invites=[{"target_email": target_email, **fields}],
    )[0]


def invites_bulk_create(
    *, organization: Organization, created_by, inviter_level: int, invites: list[dict]
) -> list[Invite]:
    """Check every invite, save them all in one transaction, then mail each: all or nothing."""
    for data in invites:
        check_invite(
            organization=organization,
            inviter_level=inviter_level,
            target_email=data["target_email"],
            level=data.get("level", Membership.Level.MEMBER),
        )
    with transaction.atomic():
        saved = [_invite_save(organization=organization, created_by=created_by, **data) for data in invites]
    # Mail only once the invites are committed, so nobody gets a link to an invite that was rolled back.
    for invite in saved:
        invite_send_email(invite=invite)
    return saved


def invite_accept_url(invite: Invite) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/api/invites/{invite.id}/accept/"


def invite_send_email(*, invite: Invite) -> bool:
    """Mail the invite through Django's email framework. A failure is logged and recorded, never raised."""
    context = {
        "invite": invite,
        "organization": invite.organization,
        "inviter": invite.created_by,
        "accept_url": invite_accept_url(invite),
        "expiry_days": settings.INVITE_EXPIRY_DAYS,
    }
    subject = render_to_string("organizations/invite_email_subject.txt", context).strip()
    body = render_to_string("organizations/invite_email.txt", context)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [invite.target_email], fail_silently=False)
    except Exception as error:  # any backend failure (SMTP, DNS, TLS...) must not lose the invite
        logger.warning("Could not mail invite %s to %s: %s", invite.id, invite.target_email, error)
        invite.emailing_error = f"{type(error).__name__}: {error}"[:1000]
        invite.save(update_fields=["emailing_error", "updated_at"])
        return False
    invite.emailing_attempt_made = True
    invite.emailing_error = ""
    invite.save(update_fields=["emailing_attempt_made", "emailing_error", "updated_at"])
    return True


@transaction.atomic
def invite_accept(*, invite: Invite, user) -> Membership:
    """Join the invite's organization at its level, if the invite is for this user and still valid."""
    invite = Invite.objects.select_for_update(of=("self",)).select_related("organization").get(pk=invite.pk)
    if invite.accepted_at is not None:
        raise ValidationError("This invite has already been used.", code="invite_used")
    if invite.is_expired:
        raise ValidationError("This invite has expired; ask for a new one.", code="invite_expired")
    if invite.target_email.lower() != user.email.lower():
        raise ValidationError("This invite is for another email address.", code="invite_email_mismatch")
    if Membership.objects.filter(organization=invite.organization, user=user).exists():
        raise ValidationError("You are already a member of this organization.", code="already_member")
    membership = Membership.objects.create(organization=invite.organization, user=user, level=invite.level)
    invite.accepted_at = timezone.now()
    invite.accepted_by = user
    invite.save(update_fields=["accepted_at", "accepted_by", "updated_at"])
    if user.current_organization_id is None:
        user.current_organization = invite.organization
        user.current_project = invite.organization.projects.order_by("id").first()
        user.save(update_fields=["current_organization", "current_project"])
    return membership


# Domains


@transaction.atomic
def domain_update(*, instance: Domain, **fields) -> Domain:
    """Apply changes; a new domain name must be verified again, with a new challenge."""
    new_name = fields.get("domain")
    if new_name is not None and new_name != instance.domain:
        instance.verified_at = None
        instance.last_verification_attempt_at = None
        instance.verification_challenge = new_verification_challenge()
        instance.jit_provisioning_enabled = False
        instance.sso_enforcement = Domain.SSOEnforcement.NONE
    for name, value in fields.items():
        setattr(instance, name, value)
    instance.full_clean()
    instance.save()
    return instance


def dns_txt_values(name: str) -> list[str]:
    """The TXT strings at `name`, through the resolver the settings describe; [] when there are none.

    Raises dns.exception.DNSException for a timeout or a failing nameserver.
    """
    nameservers = settings.DOMAIN_VERIFICATION_NAMESERVERS
    resolver = dns.resolver.Resolver(configure=not nameservers)
    if nameservers:
        resolver.nameservers = list(nameservers)
    resolver.port = settings.DOMAIN_VERIFICATION_PORT
    resolver.timeout = settings.DOMAIN_VERIFICATION_TIMEOUT
    resolver.lifetime = settings.DOMAIN_VERIFICATION_TIMEOUT
    try:
        answer = resolver.resolve(name, "TXT", search=False)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return []
    return [b"".join(record.strings).decode("utf-8", "replace") for record in answer]


def domain_verify(*, domain: Domain) -> Domain:
    """Look for the challenge in DNS. A match verifies the domain; anything else only records the attempt."""
    if domain.is_verified:
        raise ValidationError("This domain is already verified.", code="already_verified")
    name = f"{settings.DOMAIN_VERIFICATION_PREFIX}.{domain.domain}"
    try:
        values = dns_txt_values(name)
    except dns.exception.DNSException as error:
        logger.info("DNS lookup of %s failed: %r", name, error)
        values = []
    now = timezone.now()
    domain.last_verification_attempt_at = now
    if domain.verification_challenge in values:
        domain.verified_at = now
    domain.save(update_fields=["last_verification_attempt_at", "verified_at", "updated_at"])
    return domain
