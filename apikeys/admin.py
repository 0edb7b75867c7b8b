from django.contrib import admin, messages
from django.utils import timezone

from apikeys.forms import PersonalAPIKeyIssueForm, ProjectSecretKeyIssueForm
from apikeys.models import PersonalAPIKey, ProjectSecretKey
from apikeys.oauth import admin as oauth_admin  # noqa: F401 - registers OAuth's room's admin
from apikeys.services import api_key_create, api_key_revoke, project_key_create, project_key_revoke
from workspace.admin import RecordedModelAdmin, short, shortened


@admin.register(PersonalAPIKey)
class PersonalAPIKeyAdmin(RecordedModelAdmin):
    """Keys are issued here through the same service as the command; the plaintext is shown once, and neither it
    nor the stored digest reaches the activity log."""

    list_display = (
        short("label"),
        short("user__email", "user", limit=30),
        "mask_value",
        "scope_list",
        "state",
        "last_used_at",
        "created_at",
    )
    list_filter = ("revoked_at", "expires_at", "created_at")
    list_select_related = ("user",)
    search_fields = ("label", "user__email", "mask_value")
    autocomplete_fields = ("user",)
    readonly_fields = (
        "mask_value",
        "scopes",
        "scoped_organizations",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    fields = ("user", "label", *readonly_fields)
    actions = ["revoke"]
    activity_secret_fields = frozenset({"secure_value"})

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = PersonalAPIKeyIssueForm
            kwargs["fields"] = ["user", "label", "scopes", "organizations", "expires_in_days"]
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["user", "label", "scopes", "organizations", "expires_in_days"]
        return super().get_fields(request, obj)

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("user", *self.readonly_fields)

    @admin.display(description="state", ordering="revoked_at")
    def state(self, key):
        """Revoked, expired (with the day) or active: what the expiry and revocation columns would say."""
        if key.revoked_at is not None:
            return "revoked"
        if key.expires_at is not None:
            return f"{'expired' if key.expires_at <= timezone.now() else 'expires'} {key.expires_at:%Y-%m-%d}"
        return "active"

    @admin.display(description="scopes")
    def scope_list(self, key):
        return shortened(", ".join(key.scopes) or "(none)")

    def activity_context(self, obj) -> dict:
        return {}  # a key belongs to a person, not to one organization

    def create_object(self, request, obj, form):
        key, plaintext = api_key_create(
            user=form.cleaned_data["user"],
            label=form.cleaned_data["label"],
            scopes=form.cleaned_data["scopes"],
            scoped_organizations=[org.pk for org in form.cleaned_data["organizations"]],
            expires_in_days=form.cleaned_data.get("expires_in_days"),
        )
        messages.warning(request, f"Copy the new key now; it will not be shown again: {plaintext}")
        return key

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        revoked = self.apply_to_each(
            request, queryset.filter(revoked_at__isnull=True), lambda key: api_key_revoke(key=key)
        )
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(ProjectSecretKey)
class ProjectSecretKeyAdmin(RecordedModelAdmin):
    """A project's keys, issued here through the same service as the API and the command: the plaintext is shown once,
    and neither it nor the stored digests reach a page or the activity log. Revoked keys stay listed, for the record.
    """

    list_display = (
        short("label"),
        short("project__name", "project", limit=30),
        "mask_value",
        "scope_list",
        "state",
        "last_used_at",
        "created_at",
        short("created_by__email", "created by", limit=30),
    )
    list_filter = ("revoked_at", "created_at")
    list_select_related = ("project", "created_by")
    search_fields = ("label", "mask_value", "project__name", "created_by__email")
    raw_id_fields = ("project",)
    readonly_fields = (
        "mask_value",
        "scopes",
        "endpoints",
        "created_by",
        "created_at",
        "last_used_at",
        "rolled_at",
        "previous_expires_at",
        "revoked_at",
    )
    fields = ("project", "label", *readonly_fields)
    actions = ["revoke"]
    activity_secret_fields = frozenset({"secure_value", "previous_secure_value"})

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ProjectSecretKeyIssueForm
            kwargs["fields"] = ["project", "label", "scopes", "endpoints"]
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["project", "label", "scopes", "endpoints"]
        return super().get_fields(request, obj)

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("project", *self.readonly_fields)

    @admin.display(description="state", ordering="revoked_at")
    def state(self, key):
        if key.revoked_at is not None:
            return "revoked"
        if key.previous_expires_at is not None and key.previous_expires_at > timezone.now():
            return f"rolled; previous secret until {key.previous_expires_at:%Y-%m-%d %H:%M}"
        return "active"

    @admin.display(description="scopes")
    def scope_list(self, key):
        return shortened(", ".join(key.scopes) or "(none)")

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.project.organization_id, "project_id": obj.project_id}

    def create_object(self, request, obj, form):
        key, plaintext = project_key_create(
            actor=request.user,
            project=form.cleaned_data["project"],
            label=form.cleaned_data["label"],
            scopes=form.cleaned_data["scopes"],
            endpoints=form.cleaned_data["endpoints"],
        )
        messages.warning(request, f"Copy the new key now; it will not be shown again: {plaintext}")
        return key

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        revoked = self.apply_to_each(
            request,
            queryset.filter(revoked_at__isnull=True),
            lambda key: project_key_revoke(actor=request.user, key=key),
            activity="revoked",
        )
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)
