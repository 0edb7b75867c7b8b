"""Admin for the workspace's own models, and the base every app's admin builds on: `RecordedModelAdmin`, which
records each admin write in the activity log exactly as the API does (DECISIONS.md §10, STYLE.md #21)."""

import json
from collections.abc import Collection

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import models, transaction
from django.http import HttpResponseRedirect
from django.utils.html import format_html
from django.utils.text import Truncator

from workspace.models import ActivityLog, User
from workspace.services import VOLATILE_FIELDS, activity_record_change, secret_mask, snapshot

# The index lists every model already; without the sidebar beside each page, a changelist at 1280 px has room for its
# columns and its filters without scrolling sideways.
admin.site.enable_nav_sidebar = False

# Characters of free text a changelist column shows; the whole text is in the cell's tooltip and on the change page.
SHORT_TEXT = 40


def shortened(text, limit: int = SHORT_TEXT):
    """`text` cut to `limit` characters for a list column, so that a list fits the screen without scrolling; the
    whole text stays in the tooltip."""
    text = "" if text is None else str(text)
    short = Truncator(text).chars(limit)
    return short if short == text else format_html('<span title="{}">{}</span>', text, short)


def short(path: str, description: str | None = None, *, limit: int = SHORT_TEXT, ordering: str | None = None):
    """A changelist column showing `path` (a field, or a `__` path through related records) cut to `limit`
    characters: `list_display = (short("name"), short("project__name", "project"), ...)`. Sorted by `path`, or by
    `ordering` when given."""

    def column(obj):
        value = obj
        for part in path.split("__"):
            value = getattr(value, part, None)
            if value is None:
                return None  # the admin's empty value, as for a plain column
        return shortened(value, limit)

    column.__name__ = path
    column.short_description = description or path.rpartition("__")[2].replace("_", " ")
    column.admin_order_field = ordering or path
    return column


class RecordedAdminMixin:
    """How one kind of record is written and recorded from admin; shared by model admins and their inlines.

    Each write goes through `create_object`, `update_object` or `delete_object`. By default they save or delete
    the row; an admin overrides them to call its app's service with `actor=request.user` wherever that service
    holds a rule (the last owner, the last project, a renamed domain's verification). The activity entry is
    recorded around the call, so an override never logs.
    """

    # The kind of record in the activity log; default: the model's name, as in the API.
    activity_scope: str | None = None
    # Fields whose values never reach the log: each is replaced by a keyed digest (see `secret_mask`).
    activity_secret_fields: frozenset[str] = frozenset()
    # Fields whose change alone is not worth an entry (they move on every save).
    activity_ignored_fields: frozenset[str] = VOLATILE_FIELDS

    def activity_context(self, obj) -> dict:
        """The `organization_id` and `project_id` stored with the record's entries ({} for records of no tenant)."""
        raise ImproperlyConfigured(
            f"{type(self).__name__} must define activity_context(obj) returning the record's organization_id and "
            "project_id, so that its entries appear in the organization's activity log."
        )

    def activity_state(self, obj) -> dict:
        """What the log compares and keeps of a record: its concrete fields, secrets masked. Override to mask
        secrets inside a field (a config object's secret keys)."""
        state = snapshot(obj)
        for name in self.activity_secret_fields:
            if state.get(name) not in (None, ""):
                state[name] = secret_mask(state[name])
        return state

    def record_activity(self, request, obj, activity: str, *, before, after, context=None, force=False):
        """One entry for a change of `obj` by the operator (no key), or none when nothing but ignored fields moved."""
        return activity_record_change(
            user=request.user,
            instance=obj,
            scope=self.activity_scope or type(obj).__name__,
            activity=activity,
            before=before,
            after=after,
            ignored=self.activity_ignored_fields,
            force=force,
            **(self.activity_context(obj) if context is None else context),
        )

    # Writes

    def create_object(self, request, obj, form) -> models.Model:
        """Save a new record built by the admin form; returns the saved record."""
        obj.save()
        return obj

    def update_object(self, request, obj, changes: dict) -> models.Model:
        """Apply `changes` (field name -> new value, never empty) to `obj`, the stored row read under a lock; only
        those fields are written, so that the fields the operator left alone keep their stored values."""
        for name, value in changes.items():
            setattr(obj, name, value)
        auto_now = [field.name for field in obj._meta.concrete_fields if getattr(field, "auto_now", False)]
        obj.save(update_fields=[*changes, *auto_now])
        return obj

    def delete_object(self, request, obj) -> None:
        obj.delete()

    # The recorded write path

    def stored(self, obj):
        """The record as stored, read under a row lock (a no-op on SQLite)."""
        return type(obj)._base_manager.select_for_update().get(pk=obj.pk)

    def record_create(self, request, obj, form) -> models.Model:
        saved = self.create_object(request, obj, form)
        self.record_activity(request, saved, "created", before=None, after=self.activity_state(saved))
        return saved

    def record_update(self, request, obj, changed_fields: Collection[str]) -> models.Model:
        """Write the fields a form changed (`changed_fields`) whose values differ from the stored row, and record
        them. Fields the operator did not touch are left as stored, even where the form would round them (a
        datetime's microseconds)."""
        stored = self.stored(obj)
        changes = {
            field.name: getattr(obj, field.name)
            for field in obj._meta.concrete_fields
            if field.name in changed_fields and getattr(obj, field.attname) != getattr(stored, field.attname)
        }
        if not changes:
            return stored
        before = self.activity_state(stored)
        saved = self.update_object(request, stored, changes)
        self.record_activity(request, saved, "updated", before=before, after=self.activity_state(saved))
        return saved

    def record_delete(self, request, obj) -> None:
        before, context, pk = self.activity_state(obj), self.activity_context(obj), obj.pk
        self.delete_object(request, obj)
        obj.pk = pk  # Django clears it on delete; the entry needs it
        self.record_activity(request, obj, "deleted", before=before, after=None, context=context)


def sync(obj: models.Model, saved: models.Model) -> None:
    """Make the admin's instance the saved record (a service may have saved another instance, or more fields)."""
    if saved is not obj:
        obj.__dict__.update(saved.__dict__)


class RecordedModelAdmin(RecordedAdminMixin, admin.ModelAdmin):
    """A model admin whose every write is recorded in the activity log, one entry per record that really changed:
    the change form (only the fields that differ), add, delete (one entry per object, bulk included), inline
    rows (each a record of its own, through its inline's `RecordedInlineMixin` hooks) and actions written with
    `apply_to_each`.

    A rule broken by a service (Django's ValidationError) is shown as an error message and the whole write is
    rolled back.
    """

    def save_model(self, request, obj, form, change):
        sync(
            obj,
            self.record_update(request, obj, form.changed_data) if change else self.record_create(request, obj, form),
        )

    def delete_model(self, request, obj):
        self.record_delete(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for obj in queryset:
                self.record_delete(request, obj)

    def get_formsets_with_inlines(self, request, obj=None):
        for formset, inline in super().get_formsets_with_inlines(request, obj):
            formset.recorded_inline = inline
            yield formset, inline

    def save_formset(self, request, form, formset, change):
        inline = getattr(formset, "recorded_inline", None)
        if not isinstance(inline, RecordedAdminMixin):
            raise ImproperlyConfigured(
                f"{type(self).__name__}: the inline of {formset.model.__name__} must use RecordedInlineMixin "
                "(workspace.admin), so that its rows' changes are recorded."
            )
        formset.save(commit=False)
        for obj in formset.deleted_objects:
            inline.record_delete(request, inline.stored(obj))
        for obj, changed_fields in formset.changed_objects:
            sync(obj, inline.record_update(request, obj, changed_fields))
        for obj in formset.new_objects:
            sync(obj, inline.record_create(request, obj, None))
        formset.save_m2m()

    def apply_to_each(self, request, queryset, change, *, activity: str = "updated") -> int:
        """Apply `change(obj)` (a service call) to each selected record, read under a lock, and record one entry
        per record that changed; returns how many did. One transaction for the whole action."""
        changed = 0
        with transaction.atomic():
            pks = list(queryset.values_list("pk", flat=True))
            for obj in self.model._base_manager.select_for_update().filter(pk__in=pks).order_by("pk"):
                before = self.activity_state(obj)
                result = change(obj)
                obj = result if isinstance(result, models.Model) else obj
                entry = self.record_activity(request, obj, activity, before=before, after=self.activity_state(obj))
                changed += entry is not None
        return changed

    # A service's ValidationError is shown, not a server error (the view's transaction is rolled back first).

    def _refused(self, request, error: ValidationError):
        self.message_user(request, " ".join(error.messages), messages.ERROR)
        return HttpResponseRedirect(request.get_full_path())

    def changeform_view(self, request, *args, **kwargs):
        try:
            return super().changeform_view(request, *args, **kwargs)
        except ValidationError as error:
            return self._refused(request, error)

    def delete_view(self, request, *args, **kwargs):
        try:
            return super().delete_view(request, *args, **kwargs)
        except ValidationError as error:
            return self._refused(request, error)

    def changelist_view(self, request, *args, **kwargs):
        try:
            return super().changelist_view(request, *args, **kwargs)
        except ValidationError as error:
            return self._refused(request, error)


class RecordedInlineMixin(RecordedAdminMixin):
    """For the inlines of a `RecordedModelAdmin`: each added, changed or deleted row is recorded as a record of its
    own kind, with the same hooks (`activity_context`, `update_object`, ...) as a model admin."""


class UserCreationForm(AdminUserCreationForm):
    class Meta:
        model = User
        fields = ("email",)


class UserEditForm(UserChangeForm):
    class Meta:
        model = User
        fields = "__all__"


@admin.register(User)
class UserAdmin(RecordedModelAdmin, BaseUserAdmin):
    form = UserEditForm
    add_form = UserCreationForm
    list_display = (
        short("email", limit=30),
        "full_name",
        short("current_organization__name", "organization"),
        "is_active",
        "is_staff",
        "date_joined",
    )
    list_select_related = ("current_organization",)
    list_filter = ("is_active", "is_staff", "is_superuser", "is_2fa_enabled")
    search_fields = ("email", "first_name", "last_name", "uuid")
    ordering = ("email",)
    raw_id_fields = ("current_organization", "current_project")
    readonly_fields = ("uuid", "last_login", "date_joined")
    fieldsets = (
        (None, {"fields": ("email", "password", "uuid", "distinct_id")}),
        ("Profile", {"fields": ("first_name", "last_name", "is_email_verified", "hedgehog_config")}),
        ("Security", {"fields": ("is_2fa_enabled", "has_social_auth")}),
        ("Current context", {"fields": ("current_organization", "current_project")}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)
    activity_secret_fields = frozenset({"password"})
    activity_ignored_fields = VOLATILE_FIELDS | {"last_login"}

    def activity_context(self, obj) -> dict:
        return {}  # a person belongs to no one tenant

    @admin.display(description="name", ordering="first_name")
    def full_name(self, user):
        return shortened(user.get_full_name(), 30) or None

    def user_change_password(self, request, id, form_url=""):
        """The password form saves outside `save_model`; its change is recorded here, the hash masked."""
        if request.method != "POST":
            return super().user_change_password(request, id, form_url)
        with transaction.atomic():
            user = self.get_object(request, unquote(id))
            before = self.activity_state(user) if user is not None else None
            response = super().user_change_password(request, id, form_url)
            if before is not None and isinstance(response, HttpResponseRedirect):
                user.refresh_from_db()
                self.record_activity(request, user, "updated", before=before, after=self.activity_state(user))
            return response


class ReadOnlyAdminMixin:
    """Admin pages of rows that only the service writes (the activity log, events and persons, the events sync's
    position): shown, never added, changed or deleted by hand."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ActivityLog)
class ActivityLogAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The activity log, read-only: entries are written by the API and admin writes, never by hand."""

    # The organization's id (a UUID) is left to the search box and the entry's page: it would take a third of a row.
    list_display = (
        "created_at",
        short("user__email", "user", limit=30),
        "api_key_mask",
        short("api_key_label", "key label", limit=30),
        "scope",
        short("item_id", "item", limit=16),
        "activity",
        "project_id",
    )
    list_select_related = ("user",)
    list_filter = ("scope", "activity", "created_at")
    search_fields = ("item_id", "user__email", "api_key_mask", "api_key_label", "organization_id")
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "user",
        "api_key_mask",
        "api_key_label",
        "organization_id",
        "project_id",
        "scope",
        "item_id",
        "activity",
        "detail_pretty",
    )
    readonly_fields = fields

    @admin.display(description="detail")
    def detail_pretty(self, entry):
        return format_html("<pre>{}</pre>", json.dumps(entry.detail, indent=2, sort_keys=True, ensure_ascii=False))
