import logging
from zoneinfo import ZoneInfo

from django.contrib import admin, messages
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from dashboards.core.models import (
    Dashboard,
    DashboardCollaborator,
    DashboardTag,
    DashboardTile,
    Insight,
    InsightTag,
    SharingConfiguration,
    SharingPassword,
    Text,
)
from dashboards.core.results import InsightResults
from dashboards.core.services import dashboard_update, insight_update
from dashboards.core.tiles import text_update
from dashboards.public.charts import chart
from dashboards.public.models import EmbedSecret
from dashboards.public.pages import tile_meta
from dashboards.public.services import embed_secret_delete, embed_secret_update
from workspace.admin import RecordedInlineMixin, RecordedModelAdmin, short, shortened
from workspace.services import VOLATILE_FIELDS

logger = logging.getLogger(__name__)

# The entry names the operator; the modifier moving with the change is not a change of its own (the admin records
# a record's columns, so the column name too).
MODIFIED_FIELDS = VOLATILE_FIELDS | {"last_modified_by", "last_modified_by_id"}


def dashboard_context(dashboard: Dashboard) -> dict:
    return {"organization_id": dashboard.project.organization_id, "project_id": dashboard.project_id}


def project_context(obj) -> dict:
    return {"organization_id": obj.project.organization_id, "project_id": obj.project_id}


CHART_FAILED = "This chart could not be drawn; the reason is in the service's log."


def insight_charts(
    insights, *, project, link: bool = False, empty_text: str = "No insights.", filters: dict | None = None
):
    """The charts of `insights` (of `project`) as HTML, each drawn from its result as the API computes it
    (dashboards.core.results, `blocking`: cached while fresh, else computed now) and as the shared page draws it; with a
    dashboard's `filters` in force over each insight's query when given (its tiles' effective queries).

    Each chart is computed in a savepoint and on its own: one whose query or drawing fails shows why, and neither
    the other charts nor the page fail with it (on PostgreSQL a failed query would otherwise spoil the transaction
    the admin page runs in)."""
    results = InsightResults(project=project, refresh="blocking", filters=filters)
    tz = ZoneInfo(project.time_zone)
    charts = []
    for insight in insights:
        shown = {"insight": insight, "chart": None, "error": None}
        if link:
            shown["link"] = reverse("admin:dashboards_insight_change", args=[insight.pk])
        try:
            with transaction.atomic():
                result = results.of(insight)
                shown["chart"] = chart(insight, result)
                shown["meta"] = f"{tile_meta(result, tz)} · {project.time_zone}"
            shown["error"] = result["error"]
        except Exception:
            logger.exception("The chart of insight %s could not be drawn in admin.", insight.pk)
            shown["error"] = CHART_FAILED
        charts.append(shown)
    return render_to_string("admin/dashboards/charts.html", {"charts": charts, "empty_text": empty_text})


class DashboardTileInline(RecordedInlineMixin, admin.StackedInline):
    """A dashboard's tiles, removed ones included, each with what it shows (linked to the insight or text)."""

    model = DashboardTile
    extra = 0
    fields = ("shows", ("insight", "text"), ("order", "color", "deleted"), "layouts")
    readonly_fields = ("shows",)
    raw_id_fields = ("insight", "text")

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("dashboard__project", "insight", "text")

    def activity_context(self, obj) -> dict:
        return dashboard_context(obj.dashboard)

    @admin.display(description="shows")
    def shows(self, tile: DashboardTile):
        if tile.insight_id is not None:
            insight = tile.insight
            url = reverse("admin:dashboards_insight_change", args=[insight.pk])
            deleted = " (deleted)" if insight.deleted else ""
            return format_html('Insight <a href="{}">{}</a>{}: {}', url, insight, deleted, insight.description)
        if tile.text_id is not None:
            url = reverse("admin:dashboards_text_change", args=[tile.text_id])
            return format_html('Text <a href="{}">{}</a>: {}', url, tile.text_id, tile.text.body)
        return "-"


class DashboardTagInline(RecordedInlineMixin, admin.TabularInline):
    model = DashboardTag
    extra = 0

    def activity_context(self, obj) -> dict:
        return dashboard_context(obj.dashboard)


class DashboardCollaboratorInline(RecordedInlineMixin, admin.TabularInline):
    model = DashboardCollaborator
    extra = 0
    autocomplete_fields = ("user",)
    fields = ("user", "level", "added_at", "updated_at")
    readonly_fields = ("level", "added_at", "updated_at")

    def activity_context(self, obj) -> dict:
        return dashboard_context(obj.dashboard)


@admin.register(Dashboard)
class DashboardAdmin(RecordedModelAdmin):
    """All dashboards, soft-deleted ones included, so that an operator can restore them."""

    list_display = (
        short("name"),
        "id",
        short("project__name", "project"),
        "pinned",
        "deleted",
        "restriction_level",
        short("created_by__email", "created by", limit=30),
        "created_at",
    )
    list_filter = ("project", "pinned", "deleted", "restriction_level", "creation_mode")
    list_select_related = ("project", "created_by")
    search_fields = ("name",)
    autocomplete_fields = ("created_by",)
    raw_id_fields = ("project",)
    readonly_fields = ("created_at", "charts")
    inlines = [DashboardTileInline, DashboardTagInline, DashboardCollaboratorInline]
    actions = ["restore", "soft_delete"]

    @admin.display(description="charts")
    def charts(self, dashboard):
        """Each shown tile's insight, charted as the shared page charts it."""
        if dashboard.pk is None:
            return "-"
        tiles = (
            DashboardTile.objects.filter(dashboard=dashboard, insight__isnull=False).shown().select_related("insight")
        )
        return insight_charts(
            [tile.insight for tile in tiles],
            project=dashboard.project,
            link=True,
            empty_text="No insight tiles.",
            filters=dashboard.filters,
        )

    def activity_context(self, obj) -> dict:
        return dashboard_context(obj)

    def update_object(self, request, obj, changes):
        return dashboard_update(actor=request.user, dashboard=obj, **changes)

    def set_deleted(self, request, queryset, deleted: bool) -> int:
        return self.apply_to_each(
            request,
            queryset.filter(deleted=not deleted),
            lambda dashboard: dashboard_update(actor=request.user, dashboard=dashboard, deleted=deleted),
        )

    @admin.action(description="Restore selected soft-deleted dashboards")
    def restore(self, request, queryset):
        count = self.set_deleted(request, queryset, deleted=False)
        self.message_user(request, f"Restored {count} dashboard(s).", messages.SUCCESS)

    @admin.action(description="Soft-delete selected dashboards")
    def soft_delete(self, request, queryset):
        count = self.set_deleted(request, queryset, deleted=True)
        self.message_user(request, f"Soft-deleted {count} dashboard(s).", messages.SUCCESS)

    def has_delete_permission(self, request, obj=None):
        # Dashboards are only ever soft-deleted (see the actions above), never removed from the database.
        return False


class SharingPasswordInline(RecordedInlineMixin, admin.TabularInline):
    """The passwords of a protected page: their notes, who made them and when; revoked by deleting. A password is
    shown once, to whoever makes it through the API, and kept only as a hash: none is made here."""

    model = SharingPassword
    extra = 0
    fields = ("note", "created_by", "created_at")
    readonly_fields = ("note", "created_by", "created_at")
    # Whoever knows a password sees the dashboard: the log never keeps its hash.
    activity_secret_fields = frozenset({"password_hash"})

    def has_add_permission(self, request, obj=None):
        return False

    def activity_context(self, obj) -> dict:
        return dashboard_context(obj.configuration.dashboard)


@admin.register(SharingConfiguration)
class SharingConfigurationAdmin(RecordedModelAdmin):
    list_display = (
        short("dashboard__name", "dashboard"),
        "project",
        "enabled",
        "expires_at",
        "password",
        "created_at",
    )
    list_filter = ("enabled", "password_required")
    inlines = [SharingPasswordInline]
    list_select_related = ("dashboard__project",)
    search_fields = ("dashboard__name",)
    autocomplete_fields = ("enabled_by",)
    raw_id_fields = ("dashboard",)
    readonly_fields = ("access_token", "created_at")
    # Whoever holds the token sees the dashboard: the log keeps a digest of it, never the token.
    activity_secret_fields = frozenset({"access_token"})

    def activity_context(self, obj) -> dict:
        return dashboard_context(obj.dashboard)

    @admin.display(description="project", ordering="dashboard__project__name")
    def project(self, configuration):
        return shortened(configuration.dashboard.project.name)

    @admin.display(boolean=True, description="password", ordering="password_required")
    def password(self, configuration):
        return configuration.password_required


class InsightTagInline(RecordedInlineMixin, admin.TabularInline):
    model = InsightTag
    extra = 0

    def activity_context(self, obj) -> dict:
        return project_context(obj.insight)


@admin.register(Insight)
class InsightAdmin(RecordedModelAdmin):
    """All insights, soft-deleted ones included; changes go through the same service as the API."""

    list_display = (
        "title",
        "short_id",
        short("project__name", "project"),
        "deleted",
        "last_modified_at",
        short("last_modified_by__email", "modified by", limit=30),
    )
    list_filter = ("deleted", "project")
    list_select_related = ("project", "last_modified_by")
    search_fields = ("name", "derived_name", "short_id")
    raw_id_fields = ("project",)
    readonly_fields = ("short_id", "created_at", "created_by", "last_modified_at", "last_modified_by", "chart")
    inlines = [InsightTagInline]
    activity_ignored_fields = MODIFIED_FIELDS

    @admin.display(description="chart")
    def chart(self, insight):
        """The insight's result, charted as the shared page charts it."""
        if insight.pk is None:
            return "-"
        return insight_charts([insight], project=insight.project)

    @admin.display(description="insight", ordering="name")
    def title(self, insight):
        return shortened(insight)

    def activity_context(self, obj) -> dict:
        return project_context(obj)

    def update_object(self, request, obj, changes):
        return insight_update(actor=request.user, insight=obj, **changes)

    def has_delete_permission(self, request, obj=None):
        # Insights are soft-deleted (the `deleted` box), never removed from the database, like dashboards.
        return False


@admin.register(Text)
class TextAdmin(RecordedModelAdmin):
    """The bodies of text tiles."""

    list_display = (short("body", "text"), "id", short("project__name", "project"), "last_modified_at")
    list_select_related = ("project",)
    search_fields = ("body",)
    raw_id_fields = ("project",)
    readonly_fields = ("created_by", "last_modified_at", "last_modified_by")
    activity_ignored_fields = MODIFIED_FIELDS

    def activity_context(self, obj) -> dict:
        return project_context(obj)

    def update_object(self, request, obj, changes):
        return text_update(actor=request.user, text=obj, **changes)

    def has_delete_permission(self, request, obj=None):
        # A text goes with its tile: remove the tile instead.
        return False


@admin.register(EmbedSecret)
class EmbedSecretAdmin(RecordedModelAdmin):
    """Embed secrets: renamed, their allowed origins changed or deleted here, never shown. They are made and rotated
    through the API, whose answer is the one place the secret is shown."""

    list_display = (short("name"), "kid", short("project__name", "project"), "origins", "created_at", "rotated_at")
    list_select_related = ("project",)
    search_fields = ("name", "kid")
    fields = ("project", "name", "kid", "allowed_origins", "created_by", "created_at", "rotated_at")
    readonly_fields = ("project", "kid", "created_by", "created_at", "rotated_at")
    # The log keeps a digest of the encrypted secret, as the API's entries do.
    activity_secret_fields = frozenset({"secret_encrypted"})

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def activity_context(self, obj) -> dict:
        return project_context(obj)

    def update_object(self, request, obj, changes):
        return embed_secret_update(actor=request.user, secret=obj, **changes)

    def delete_object(self, request, obj) -> None:
        embed_secret_delete(actor=request.user, secret=obj)

    @admin.display(description="may be framed by")
    def origins(self, secret):
        return shortened(", ".join(secret.allowed_origins) or "no site")
