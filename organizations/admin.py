from django.contrib import admin, messages
from django.db.models import Count

from organizations.models import Domain, Invite, Membership, Organization, Project
from organizations.services import domain_verify, invite_send_email


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ("user",)
    fields = ("user", "level", "joined_at", "updated_at")
    readonly_fields = ("joined_at", "updated_at")


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0
    fields = ("name", "created_at")
    readonly_fields = ("created_at",)
    show_change_link = True


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "plugins_access_level", "member_total", "created_at")
    list_filter = ("plugins_access_level", "enforce_2fa", "is_member_join_email_enabled")
    search_fields = ("name", "slug", "id")
    readonly_fields = ("id", "created_at", "updated_at")
    inlines = [MembershipInline, ProjectInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_total=Count("memberships", distinct=True))

    @admin.display(description="members", ordering="member_total")
    def member_total(self, organization):
        return organization.member_total


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "id", "organization", "created_at")
    list_select_related = ("organization",)
    list_filter = ("created_at",)
    search_fields = ("name", "organization__name", "uuid")
    raw_id_fields = ("organization",)
    readonly_fields = ("uuid", "created_at", "updated_at")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "organization", "level", "joined_at", "updated_at")
    list_select_related = ("user", "organization")
    list_filter = ("level", "joined_at")
    search_fields = ("user__email", "organization__name", "organization__id")
    raw_id_fields = ("user", "organization")
    readonly_fields = ("id", "joined_at", "updated_at")


@admin.register(Invite)
class InviteAdmin(admin.ModelAdmin):
    list_display = (
        "target_email",
        "organization",
        "level",
        "created_by",
        "created_at",
        "emailing_attempt_made",
        "accepted_at",
        "is_expired",
    )
    list_select_related = ("organization", "created_by")
    list_filter = ("level", "emailing_attempt_made", "created_at")
    search_fields = ("target_email", "organization__name", "id")
    raw_id_fields = ("organization", "created_by", "accepted_by")
    readonly_fields = ("id", "created_at", "updated_at", "emailing_attempt_made", "emailing_error", "accepted_at")
    actions = ["resend"]

    @admin.display(boolean=True, description="expired")
    def is_expired(self, invite):
        return invite.is_expired

    @admin.action(description="Resend the selected invites by email")
    def resend(self, request, queryset):
        sent = failed = 0
        for invite in queryset.filter(accepted_at__isnull=True).select_related("organization", "created_by"):
            if invite_send_email(invite=invite):
                sent += 1
            else:
                failed += 1
        self.message_user(request, f"Sent {sent} invite(s).", messages.SUCCESS)
        if failed:
            self.message_user(request, f"{failed} invite(s) could not be sent; see their email error.", messages.ERROR)


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ("domain", "organization", "verified_at", "last_verification_attempt_at", "sso_enforcement")
    list_select_related = ("organization",)
    list_filter = ("sso_enforcement", "jit_provisioning_enabled", "verified_at")
    search_fields = ("domain", "organization__name")
    raw_id_fields = ("organization",)
    readonly_fields = ("id", "verification_challenge", "last_verification_attempt_at", "created_at", "updated_at")
    actions = ["verify"]

    @admin.action(description="Verify the selected domains through DNS")
    def verify(self, request, queryset):
        verified = unverified = 0
        for domain in queryset.filter(verified_at__isnull=True):
            if domain_verify(domain=domain).is_verified:
                verified += 1
            else:
                unverified += 1
        self.message_user(request, f"Verified {verified} domain(s); {unverified} still unverified.", messages.INFO)
