"""Writes of the organizations app. Each takes the acting user (`actor`) and raises Django's ValidationError
for a broken rule; who may call them is declared in organizations/permissions.py, not checked here.

The invariants that concurrent requests could break are held by row locks and constraints: an organization
keeps at least one owner and one project, slugs stay unique, one pending invite per email.
"""

import contextlib
import logging
import secrets
import smtplib
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta

import dns.exception
import dns.resolver
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, get_connection
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.text import slugify

from organizations.models import (
    Domain,
    Invite,
    Membership,
    Organization,
    Project,
    new_project_api_token,
    new_verification_challenge,
)

logger = logging.getLogger(__name__)

DEFAULT_PROJECT_NAME = "Default project"
SLUG_ATTEMPTS = 5
MAX_EMAILING_DELAY_SECONDS = 3600


def unique_slug(name: str, *, random_suffix: bool = False) -> str:
    """A slug from the name, with `-2`, `-3`, ... appended when it is taken (or a random suffix, after races)."""
    base = slugify(name)[:40].strip("-") or "organization"
    if random_suffix:
        return f"{base}-{secrets.token_hex(3)}"
    taken = set(Organization.objects.filter(slug__startswith=base).values_list("slug", flat=True))
    if base not in taken:
        return base
    suffix = 2
    while f"{base}-{suffix}" in taken:
        suffix += 1
    return f"{base}-{suffix}"


def _set_current(user, *, organization: Organization | None, project: Project | None) -> None:
    user.current_organization = organization
    user.current_project = project
    user.save(update_fields=["current_organization", "current_project"])


def user_set_current(*, actor, user, organization: Organization | None = None, project: Project | None = None) -> bool:
    """Make an organization and a project the user's current ones (what `@current` means for them).

    A project alone brings its organization along; an organization alone brings its first project. Both must go
    together. Which records the user may pick is the caller's to decide (through what the request may see).
    Returns whether anything changed.
    """
    if project is not None and organization is not None and project.organization_id != organization.pk:
        raise ValidationError(
            {"set_current_project": ValidationError("This project is not in that organization.", code="invalid")}
        )
    if project is not None:
        organization = project.organization
    elif organization is not None:
        project = organization.projects.order_by("id").first()
    else:
        return False
    if (user.current_organization_id, user.current_project_id) == (organization.pk, getattr(project, "pk", None)):
        return False
    _set_current(user, organization=organization, project=project)
    return True


def _lock_organization(organization_id) -> Organization:
    """Lock the organization's row: writes that check a rule over its rows (last project, one pending invite
    per email) take it first, so that two of them at once run one after the other."""
    return Organization.objects.select_for_update().get(pk=organization_id)


# Its own transaction when called alone; inside a request's (or an admin view's), that one, without a savepoint of its
# own: an error in it leaves the enclosing transaction able only to roll back, which the caller does with an error
# anyway. Not so membership_update_level and membership_delete, whose refusals their tests catch and read on after.
@transaction.atomic(savepoint=False)
def organization_create(*, actor, name: str, **fields) -> Organization:
    """Create an organization with the actor as owner and a "Default project"; make both the actor's current.

    Two organizations created with the same name at once both get a slug: a slug taken in between is retried.
    """
    organization = Organization(name=name, **fields)
    organization.full_clean(exclude=["slug"])
    for attempt in range(SLUG_ATTEMPTS):
        organization.slug = unique_slug(name, random_suffix=attempt >= 2)
        try:
            with transaction.atomic():
                organization.save(force_insert=True)
            break
        except IntegrityError:
            if attempt == SLUG_ATTEMPTS - 1:
                raise
    Membership.objects.create(organization=organization, user=actor, level=Membership.Level.OWNER)
    project = Project.objects.create(organization=organization, name=DEFAULT_PROJECT_NAME)
    _set_current(actor, organization=organization, project=project)
    return organization


@transaction.atomic(savepoint=False)  # as organization_create
def organization_delete(*, actor, organization: Organization) -> None:
    """Delete an organization and everything in it. Its members whose current organization it was move to
    another of theirs, so that `@current` keeps meaning something."""
    affected = list(
        Membership.objects.filter(organization=organization, user__current_organization=organization).select_related(
            "user"
        )
    )
    organization.delete()
    for membership in affected:
        other = (
            Membership.objects.filter(user=membership.user).select_related("organization").order_by("joined_at").first()
        )
        if other is None:
            _set_current(membership.user, organization=None, project=None)
        else:
            _set_current(
                membership.user,
                organization=other.organization,
                project=other.organization.projects.order_by("id").first(),
            )


@transaction.atomic(savepoint=False)  # as organization_create
def project_create(*, actor, organization: Organization, **fields) -> Project:
    """Create a project from `fields` (the serializer's validated model fields); the first one becomes the
    creator's current project."""
    project = Project(organization=organization, **fields)
    project.full_clean()
    project.save()
    if actor.current_project_id is None:
        _set_current(actor, organization=organization, project=project)
    return project


@transaction.atomic(savepoint=False)  # as organization_create
def project_delete(*, actor, project: Project) -> None:
    """Delete a project and everything in it; an organization keeps at least one project (checked under the
    organization's lock, so two deletes at once cannot remove the last two)."""
    _lock_organization(project.organization_id)
    if not Project.objects.filter(organization_id=project.organization_id).exclude(pk=project.pk).exists():
        raise ValidationError(
            "An organization must keep at least one project; delete the organization instead.", code="last_project"
        )
    project.delete()


def project_rotate_api_token(*, actor, project: Project) -> Project:
    """Give the project a new token for sending events; the old one is refused from this moment on (401).

    The token is unique across projects; a collision of 256 random bits is not worth a retry."""
    project.api_token = new_project_api_token()
    project.save(update_fields=["api_token", "updated_at"])
    return project


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


@transaction.atomic
def membership_update_level(*, actor, membership: Membership, level: int) -> Membership:
    """Set a member's level; an organization always keeps at least one owner."""
    if level < Membership.Level.OWNER and _only_owner(membership):
        raise ValidationError(
            {
                "level": ValidationError(
                    "The last owner can't be demoted; make someone else an owner first.", "last_owner"
                )
            }
        )
    membership.level = level
    membership.save(update_fields=["level", "updated_at"])
    return membership


@transaction.atomic
def membership_delete(*, actor, membership: Membership) -> None:
    """Remove a member (or let them leave). The last owner stays; the user's `@current` no longer points here."""
    if _only_owner(membership):
        raise ValidationError(
            "The last owner can't leave or be removed; make someone else an owner first.", code="last_owner"
        )
    user = membership.user
    membership.delete()
    if user.current_organization_id == membership.organization_id:
        _set_current(user, organization=None, project=None)
    elif user.current_project_id is not None and user.current_project.organization_id == membership.organization_id:
        user.current_project = None
        user.save(update_fields=["current_project"])


# Invites


def invite_create(*, actor, organization: Organization, target_email: str, **fields) -> Invite:
    """Create (or replace) an invite, due for mailing: `send_pending_invites` mails it."""
    return invites_bulk_create(
        actor=actor, organization=organization, invites=[{"target_email": target_email, **fields}]
    )[0]


@transaction.atomic(savepoint=False)  # as organization_create
def invites_bulk_create(*, actor, organization: Organization, invites: list[dict]) -> list[Invite]:
    """Save every invite or none, each replacing the earlier pending invite for its email and saved as due for
    mailing (the outbox, `Invite.next_emailing_attempt_at`).

    The organization's row is locked first, so that parallel invites for one email leave exactly one pending
    (a partial unique constraint is the last guard). Nothing here talks to the mail server, neither inside the
    transaction nor after it: the sender, `send_pending_invites --every N`, mails what is due, so a slow or silent
    mail server never holds a lock or a request, and no one is mailed an invite that was rolled back.
    """
    _lock_organization(organization.pk)
    emails = [data["target_email"].lower() for data in invites]
    if len(set(emails)) != len(emails):
        raise ValueError("Each email is invited once (BulkInviteSerializer refuses a repeated one).")
    members = set(
        Membership.objects.filter(organization=organization, user__email__in=emails).values_list(
            "user__email", flat=True
        )
    )
    for email in emails:
        if email in members:
            raise ValidationError(
                {
                    "target_email": ValidationError(
                        f"{email} is already a member of this organization.", "already_member"
                    )
                }
            )
    organization.invites.filter(target_email__in=emails, accepted_at__isnull=True).delete()
    now = timezone.now()
    saved = []
    for data in invites:
        invite = Invite(
            organization=organization,
            created_by=actor,
            next_emailing_attempt_at=now,
            **{**data, "target_email": data["target_email"].lower()},
        )
        # Only the invite's own values: its organization is locked above and its creator is the caller, its id is new,
        # and the delete above, under the lock, leaves no other pending invite for its email (the constraint stays
        # the last guard). Checking those again would cost five statements for an answer known here.
        invite.full_clean(exclude=["organization", "created_by"], validate_unique=False, validate_constraints=False)
        invite.save()
        saved.append(invite)
    return saved


def invite_accept_url(invite: Invite) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/api/invites/{invite.id}/accept/"


def invite_email(invite: Invite) -> EmailMessage:
    """The invite's mail: who invites whom to which organization, and the link that accepts it."""
    context = {
        "invite": invite,
        "organization": invite.organization,
        "inviter": invite.created_by,
        "accept_url": invite_accept_url(invite),
        "expiry_days": settings.INVITE_EXPIRY_DAYS,
    }
    subject = render_to_string("organizations/invite_email_subject.txt", context).strip()
    body = render_to_string("organizations/invite_email.txt", context)
    return EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, [invite.target_email])


def invite_emailing_delay(attempts: int) -> timedelta:
    """How long after its `attempts`-th attempt an invite's mail is tried again: INVITE_EMAIL_RETRY_SECONDS, twice
    as long after each further attempt, an hour at most."""
    doublings = min(max(attempts - 1, 0), 12)  # past the cap for any base of a second or more
    return timedelta(seconds=min(settings.INVITE_EMAIL_RETRY_SECONDS * 2**doublings, MAX_EMAILING_DELAY_SECONDS))


def _invite_claim(invite: Invite) -> bool:
    """Take a due invite for one attempt, with an update that only succeeds if no one else took it since it was read.

    The attempt is counted before it starts, and the claim is a lease: the invite is due again only when
    INVITE_EMAIL_LEASE_SECONDS have passed, and the attempt is cut off before then (`_within_lease`). So no other
    sender takes it while a mail server is still answering, however late, and an attempt that never ends (the
    process stopped mid-send) is retried once the lease has run out.
    """
    now = timezone.now()
    attempts = invite.emailing_attempts + 1
    lease_end = now + timedelta(seconds=settings.INVITE_EMAIL_LEASE_SECONDS)
    claimed = Invite.objects.filter(
        pk=invite.pk, emailing_attempts=invite.emailing_attempts, next_emailing_attempt_at__lte=now
    ).update(emailing_attempts=attempts, next_emailing_attempt_at=lease_end)
    if claimed:
        invite.emailing_attempts, invite.next_emailing_attempt_at = attempts, lease_end
    return bool(claimed)


class LeaseEnded(TimeoutError):
    """The mail server had not finished with an invite when its sending lease was about to end."""


@contextlib.contextmanager
def _within_lease(connection):
    """Run one attempt on `connection` within its invite's lease: when nine tenths of INVITE_EMAIL_LEASE_SECONDS have
    passed, the connection's socket is shut down, which ends whatever step the mail server is slow to answer (a
    timeout bounds each step, not their sum, nor a server that sends its answer a byte at a time). The attempt then
    fails with LeaseEnded and is recorded before any other sender may take the invite. Backends without a socket
    (locmem, console) are left alone."""
    lease = settings.INVITE_EMAIL_LEASE_SECONDS
    ended = threading.Event()

    def cut() -> None:
        sock = getattr(getattr(connection, "connection", None), "sock", None)
        if sock is not None:
            ended.set()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(lease * 0.9, cut)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception as error:
        if ended.is_set():
            raise LeaseEnded(f"The mail server did not finish within the sending lease ({lease} s).") from error
        raise
    finally:
        timer.cancel()


def _invite_record_attempt(invite: Invite, error: Exception | None) -> None:
    """Record how the claimed attempt ended, unless a later attempt has been claimed since (its result wins)."""
    now = timezone.now()
    invite.emailing_attempt_made = True
    invite.emailing_error = "" if error is None else f"{type(error).__name__}: {error}"[:1000]
    invite.next_emailing_attempt_at = None if error is None else now + invite_emailing_delay(invite.emailing_attempts)
    invite.updated_at = now
    Invite.objects.filter(pk=invite.pk, emailing_attempts=invite.emailing_attempts).update(
        emailing_attempt_made=True,
        emailing_error=invite.emailing_error,
        next_emailing_attempt_at=invite.next_emailing_attempt_at,
        updated_at=now,
    )


def invites_send_email(*, invites: list[Invite]) -> dict:
    """Mail the invites that are due, over one connection to the mail server, and record each attempt on its invite
    (and on the instances given). Returns {invite id: whether it was mailed} for the invites attempted.

    Call it with no transaction open and no lock held: the mail server may take EMAIL_TIMEOUT seconds per step. An
    invite that is not due (mailed already, or being mailed by another process) is left alone. A failure other than
    a refused recipient ends the batch: the invites not tried yet stay due, so a mail server that does not answer
    costs one timeout, not one per invite. Failures are logged and recorded, never raised.
    """
    results = {}
    connection = get_connection(fail_silently=False)
    try:
        for invite in invites:
            if not _invite_claim(invite):
                continue
            try:
                with _within_lease(connection):
                    connection.open()  # once: later messages reuse the session
                    connection.send_messages([invite_email(invite)])
            except Exception as error:  # any backend failure (SMTP, DNS, TLS...) must not lose the invite
                logger.warning("Could not mail invite %s to %s: %s", invite.id, invite.target_email, error)
                _invite_record_attempt(invite, error)
                results[invite.pk] = False
                if not isinstance(error, smtplib.SMTPRecipientsRefused):
                    break
            else:
                _invite_record_attempt(invite, None)
                results[invite.pk] = True
    finally:
        try:
            connection.close()
        except Exception as error:  # the mails were taken or not already; a failed goodbye changes neither
            logger.info("Closing the mail connection failed: %r", error)
    return results


def invites_resend(*, actor, invites: list[Invite]) -> dict:
    """Mail the invites again, mailed before or not (admin's resend); returns `invites_send_email`'s results. Each is
    made due first, so one that the mail server does not take now is retried like any other."""
    now = timezone.now()
    Invite.objects.filter(pk__in=[invite.pk for invite in invites]).update(next_emailing_attempt_at=now)
    for invite in invites:
        invite.next_emailing_attempt_at = now
    return invites_send_email(invites=invites)


@dataclass
class MailingRun:
    """What one `invites_send_due` did."""

    mailed: int = 0
    failed: int = 0


def invites_send_due(*, batch_size: int = 100) -> MailingRun:
    """Mail the pending, unexpired invites whose mail is due: never sent (the process stopped between the commit
    and the mail) or failed and waited its delay. The run ends at the first batch with a failure: the mail server
    is failing, and what it did not take waits for its delay or the next run."""
    run = MailingRun()
    while True:
        now = timezone.now()
        due = list(
            Invite.objects.filter(
                next_emailing_attempt_at__lte=now,
                accepted_at__isnull=True,
                created_at__gt=now - timedelta(days=settings.INVITE_EXPIRY_DAYS),
            )
            .select_related("organization", "created_by")
            .order_by("next_emailing_attempt_at", "pk")[:batch_size]
        )
        results = invites_send_email(invites=due) if due else {}
        mailed = sum(results.values())
        run.mailed += mailed
        run.failed += len(results) - mailed
        if not results or mailed < len(results):
            return run


@transaction.atomic(savepoint=False)  # as organization_create
def invite_accept(*, actor, invite: Invite) -> Membership:
    """Join the invite's organization at its level, if the invite is for the actor and still valid."""
    user = actor
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
        _set_current(
            user, organization=invite.organization, project=invite.organization.projects.order_by("id").first()
        )
    return membership


# Domains


def _domain_save(domain: Domain) -> Domain:
    """Save; a domain registered by another request in between is a 400, decided by the unique index."""
    domain.full_clean(validate_unique=False)
    try:
        with transaction.atomic():
            domain.save()
    except IntegrityError as error:
        raise ValidationError({"domain": ValidationError("This domain is already registered.", "unique")}) from error
    return domain


def domain_create(*, actor, organization: Organization, **fields) -> Domain:
    return _domain_save(Domain(organization=organization, **fields))


def domain_update(*, actor, instance: Domain, **changes) -> Domain:
    """Apply changes (`instance`, since `domain` is a field); a new name must be verified again, with a new
    challenge."""
    new_name = changes.get("domain")
    if new_name is not None and new_name != instance.domain:
        instance.verified_at = None
        instance.last_verification_attempt_at = None
        instance.verification_challenge = new_verification_challenge()
        instance.jit_provisioning_enabled = False
        instance.sso_enforcement = Domain.SSOEnforcement.NONE
    for name, value in changes.items():
        setattr(instance, name, value)
    return _domain_save(instance)


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


@dataclass(frozen=True)
class DomainLookup:
    """What DNS holds at a domain's challenge record, and the name and challenge it was asked for."""

    domain: str
    challenge: str
    values: tuple[str, ...]


def _refuse_verified(domain: Domain) -> None:
    if domain.is_verified:
        raise ValidationError("This domain is already verified.", code="already_verified")


def domain_verification_lookup(*, domain: Domain) -> DomainLookup:
    """Ask DNS for the record that proves the domain; a timeout or a failing nameserver is an empty answer.

    It waits for DNS up to DOMAIN_VERIFICATION_TIMEOUT and touches no row: call it with no transaction open and no
    lock held, then apply the answer with `domain_verify`.
    """
    _refuse_verified(domain)
    name = f"{settings.DOMAIN_VERIFICATION_PREFIX}.{domain.domain}"
    try:
        values = dns_txt_values(name)
    except dns.exception.DNSException as error:
        logger.info("DNS lookup of %s failed: %r", name, error)
        values = []
    return DomainLookup(domain=domain.domain, challenge=domain.verification_challenge, values=tuple(values))


def domain_verify(*, actor, domain: Domain, lookup: DomainLookup) -> Domain:
    """Apply a lookup to the domain, read again under its lock. A match verifies the domain; anything else only
    records the attempt. A lookup made before the domain was renamed says nothing about it now: it is discarded and
    the domain is returned as it is."""
    _refuse_verified(domain)
    if (domain.domain, domain.verification_challenge) != (lookup.domain, lookup.challenge):
        return domain
    now = timezone.now()
    domain.last_verification_attempt_at = now
    if domain.verification_challenge in lookup.values:
        domain.verified_at = now
    domain.save(update_fields=["last_verification_attempt_at", "verified_at", "updated_at"])
    return domain
