from django.contrib import admin, messages
from oauth2_provider import admin as toolkit

from apikeys.oauth.models import ConnectedApp
from apikeys.oauth.services import connected_app_revoke
from workspace.admin import RecordedModelAdmin, short, shortened


@admin.register(ConnectedApp)
class ConnectedAppAdmin(RecordedModelAdmin):
    """People's connected OAuth apps, read-only; revoking goes through the same service as the API, which records it
    (deleting is not offered: a consent is revoked, with its tokens, and its history kept).
    The OAuth applications and tokens themselves are django-oauth-toolkit's admin pages, which show no token value
    (they are stored as digests)."""

    list_display = (
        short("application__name", "application", limit=40),
        short("user__email", "user", limit=30),
        "organization",
        "project",
        "scope_list",
        "state",
        "last_used_at",
        "created_at",
    )
    list_filter = ("revoked_at", "created_at")
    list_select_related = ("application", "user", "organization", "project")
    search_fields = ("application__name", "application__client_id", "user__email")
    readonly_fields = (
        "uuid",
        "user",
        "application",
        "organization",
        "project",
        "scopes",
        "resource",
        "token_family",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    fields = readonly_fields
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="scopes")
    def scope_list(self, connected_app):
        return shortened(", ".join(connected_app.scopes) or "(none)")

    @admin.display(description="state", ordering="revoked_at")
    def state(self, connected_app):
        if connected_app.revoked_at is not None:
            return "revoked"
        return "active" if connected_app.token_family else "pending"

    @admin.action(description="Revoke selected connected apps")
    def revoke(self, request, queryset):
        revoked = 0
        for connected_app in queryset.filter(revoked_at__isnull=True):
            connected_app_revoke(connected_app=connected_app, actor=request.user)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} connected app(s).", messages.SUCCESS)


# The toolkit's own admin pages (OAUTH2_PROVIDER["*_ADMIN_CLASS"]), as they are (no token value shown: tokens are stored
# as digests, codes masked), with the person picked by autocomplete as everywhere in this admin.


class ApplicationAdmin(toolkit.ApplicationAdmin):
    raw_id_fields = ()
    autocomplete_fields = ("user",)


class AccessTokenAdmin(toolkit.AccessTokenAdmin):
    raw_id_fields = ("source_refresh_token",)
    autocomplete_fields = ("user",)


class RefreshTokenAdmin(toolkit.RefreshTokenAdmin):
    raw_id_fields = ("access_token",)
    autocomplete_fields = ("user",)


class GrantAdmin(toolkit.GrantAdmin):
    raw_id_fields = ()
    autocomplete_fields = ("user",)


class IDTokenAdmin(toolkit.IDTokenAdmin):
    raw_id_fields = ()
    autocomplete_fields = ("user",)
