from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count

from organizations.models import Domain, Invite, Membership, Organization, Project
from organizations.services import (
    domain_update,
    domain_verification_lookup,
    domain_verify,
    invites_resend,
    membership_delete,
    membership_update_level,
    organization_delete,
    project_delete,
    project_rotate_api_token,
)
from workspace.admin import RecordedInlineMixin, RecordedModelAdmin, short


def membership_update(request, membership: Membership, changes: dict) -> Membership:
    """Only the level of a membership changes, through the service that keeps the organization's last owner."""
    if set(changes) - {"level"}:
        raise ValidationError(
            "A membership's user and organization cannot change; remove it and add another.", code="invalid"
        )
    return membership_update_level(actor=request.user, membership=membership, level=changes["level"])


class MembershipWrites:
    """Membership edits and removals in admin go through the services that keep the organization's last owner."""

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.organization_id}

    def update_object(self, request, obj, changes):
        return membership_update(request, obj, changes)

    def delete_object(self, request, obj):
        membership_delete(actor=request.user, membership=obj)


class MembershipInline(MembershipWrites, RecordedInlineMixin, admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)
    fields = ("user", "level", "joined_at", "updated_at")
    readonly_fields = ("joined_at", "updated_at")


class ProjectInline(RecordedInlineMixin, admin.TabularInline):
    model = Project
    extra = 0
    fields = ("name", "created_at")
    readonly_fields = ("created_at",)
    show_change_link = True

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.organization_id, "project_id": obj.pk}

    def delete_object(self, request, obj):
        project_delete(actor=request.user, project=obj)


@admin.register(Organization)
class OrganizationAdmin(RecordedModelAdmin):
    list_display = (short("name"), short("slug"), "plugins_access_level", "member_total", "created_at")
    list_filter = ("plugins_access_level", "enforce_2fa", "is_member_join_email_enabled")
    search_fields = ("name", "slug", "id")
    readonly_fields = ("id", "created_at", "updated_at")
    inlines = [MembershipInline, ProjectInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_total=Count("memberships", distinct=True))

    @admin.display(description="members", ordering="member_total")
    def member_total(self, organization):
        return organization.member_total

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.pk}

    def delete_object(self, request, obj):
        organization_delete(actor=request.user, organization=obj)


@admin.register(Project)
class ProjectAdmin(RecordedModelAdmin):
    list_display = (short("name"), "id", short("organization__name", "organization"), "created_at")
    list_select_related = ("organization",)
    list_filter = ("created_at",)
    search_fields = ("name", "organization__name", "uuid", "=api_token")
    raw_id_fields = ("organization",)
    readonly_fields = ("uuid", "api_token", "time_zone", "created_at", "updated_at")
    actions = ["rotate_api_token"]

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.organization_id, "project_id": obj.pk}

    def delete_object(self, request, obj):
        project_delete(actor=request.user, project=obj)

    @admin.action(description="Rotate the API token of the selected projects (the old one stops working)")
    def rotate_api_token(self, request, queryset):
        rotated = self.apply_to_each(
            request,
            queryset,
            lambda project: project_rotate_api_token(actor=request.user, project=project),
            activity="api_token_rotated",
        )
        self.message_user(request, f"Rotated the API token of {rotated} project(s).", messages.SUCCESS)


@admin.register(Membership)
class MembershipAdmin(MembershipWrites, RecordedModelAdmin):
    list_display = (
        short("user__email", "user", limit=30),
        short("organization__name", "organization"),
        "level",
        "joined_at",
        "updated_at",
    )
    list_select_related = ("user", "organization")
    list_filter = ("level", "joined_at")
    search_fields = ("user__email", "organization__name", "organization__id")
    autocomplete_fields = ("user",)
    raw_id_fields = ("organization",)
    readonly_fields = ("id", "joined_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return self.readonly_fields
        return ("user", "organization", *self.readonly_fields)


@admin.register(Invite)
class InviteAdmin(RecordedModelAdmin):
    list_display = (
        short("target_email", "email", limit=30),
        short("organization__name", "organization"),
        "level",
        short("created_by__email", "created by", limit=30),
        "created_at",
        "emailed",
        "status",
    )
    list_select_related = ("organization", "created_by")
    list_filter = ("level", "emailing_attempt_made", "created_at")
    search_fields = ("target_email", "organization__name", "id")
    autocomplete_fields = ("created_by", "accepted_by")
    raw_id_fields = ("organization",)
    readonly_fields = (
        "id",
        "created_at",
        "updated_at",
        "emailing_attempt_made",
        "emailing_error",
        "emailing_attempts",
        "next_emailing_attempt_at",
        "accepted_at",
    )
    actions = ["resend"]
    # The mail's bookkeeping: an attempt alone is not a change of the invite (what it did is, in the fields above).
    activity_ignored_fields = RecordedModelAdmin.activity_ignored_fields | {
        "emailing_attempts",
        "next_emailing_attempt_at",
    }

    @admin.display(boolean=True, description="emailed", ordering="emailing_attempt_made")
    def emailed(self, invite):
        return invite.emailing_attempt_made

    @admin.display(description="status", ordering="accepted_at")
    def status(self, invite):
        """Accepted, expired or pending: one column where the acceptance time and the expiry flag took two."""
        if invite.accepted_at is not None:
            return "accepted"
        return "expired" if invite.is_expired else "pending"

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.organization_id}

    @admin.action(description="Resend the selected invites by email")
    def resend(self, request, queryset):
        """Mail each selected pending invite again, with no transaction open or row locked while the mail server
        works (organizations.services `invites_resend`).

        Each invite mailed is recorded as `resent`, even when its row ends up as it was: a mail sent to someone
        in the organization's name is a change outside the database that the organization's admins should be
        able to trace. A failed attempt mails nobody, so it is recorded (as `resent`, with the error) only when
        it changed the invite's emailing fields.
        """
        pending = list(queryset.filter(accepted_at__isnull=True).select_related("organization", "created_by"))
        before = {invite.pk: self.activity_state(invite) for invite in pending}
        results = invites_resend(actor=request.user, invites=pending)
        for invite in pending:
            if invite.pk in results:
                after = self.activity_state(invite)
                self.record_activity(
                    request, invite, "resent", before=before[invite.pk], after=after, force=results[invite.pk]
                )
        sent = sum(results.values())
        failed = len(results) - sent
        untried = len(pending) - len(results)
        self.message_user(request, f"Sent {sent} invite(s).", messages.SUCCESS)
        if failed:
            self.message_user(request, f"{failed} invite(s) could not be sent; see their email error.", messages.ERROR)
        if untried:
            self.message_user(
                request,
                f"{untried} invite(s) were not tried once the mail server failed; `send_pending_invites` retries them.",
                messages.WARNING,
            )


@admin.register(Domain)
class DomainAdmin(RecordedModelAdmin):
    list_display = (
        short("domain"),
        short("organization__name", "organization"),
        "verified_at",
        "last_verification_attempt_at",
        "sso_enforcement",
    )
    list_select_related = ("organization",)
    list_filter = ("sso_enforcement", "jit_provisioning_enabled", "verified_at")
    search_fields = ("domain", "organization__name")
    raw_id_fields = ("organization",)
    readonly_fields = ("id", "verification_challenge", "last_verification_attempt_at", "created_at", "updated_at")
    actions = ["verify"]
    # As in the API, where the attempt time is not part of a domain: a failed check alone changes nothing.
    activity_ignored_fields = RecordedModelAdmin.activity_ignored_fields | {"last_verification_attempt_at"}

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.organization_id}

    def update_object(self, request, obj, changes):
        return domain_update(actor=request.user, instance=obj, **changes)

    @admin.action(description="Verify the selected domains through DNS")
    def verify(self, request, queryset):
        """Ask DNS for each selected unverified domain with no row locked, then apply the answers under the locks
        (a domain renamed or verified in between keeps its state)."""
        unverified = list(queryset.filter(verified_at__isnull=True))
        total = len(unverified)
        lookups = {domain.pk: domain_verification_lookup(domain=domain) for domain in unverified}
        verified = self.apply_to_each(
            request,
            queryset.filter(pk__in=lookups),
            lambda domain: (
                domain
                if domain.is_verified
                else domain_verify(actor=request.user, domain=domain, lookup=lookups[domain.pk])
            ),
        )
        self.message_user(
            request, f"Verified {verified} domain(s); {total - verified} still unverified.", messages.INFO
        )
