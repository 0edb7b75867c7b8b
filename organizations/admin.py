from django.contrib import admin
from django.db.models import Count

from organizations.models import Membership, Organization, Project


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
