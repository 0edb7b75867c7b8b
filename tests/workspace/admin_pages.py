"""Drive admin pages as an operator's browser would, and read what they recorded."""

import datetime as dt
import importlib
from html.parser import HTMLParser

from django.contrib import admin
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from apikeys.services import api_key_create
from dashboards.public.services import sharing_configuration_get_or_create
from organizations.models import Membership
from pipelines.events.models import Event
from tests.dashboards.factories import DashboardCollaboratorFactory, DashboardFactory, DashboardTileFactory
from tests.organizations.factories import (
    DomainFactory,
    InviteFactory,
    MembershipFactory,
    OrganizationFactory,
    ProjectFactory,
)
from tests.pipelines.factories import (
    BatchExportBackfillFactory,
    BatchExportFactory,
    BatchExportRunFactory,
    BatchExportRunLogFactory,
    EventFactory,
    PluginConfigFactory,
    PluginFactory,
    PluginSourceFileFactory,
)
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog


def change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def run_action(client, model, action: str, objects) -> None:
    response = client.post(changelist_url(model), {"action": action, "_selected_action": [o.pk for o in objects]})
    assert response.status_code == 302


def entries(**filters) -> list[ActivityLog]:
    return list(ActivityLog.objects.filter(**filters).order_by("id"))


def assert_by_operator(entry: ActivityLog, operator, organization_id=None, project_id=None) -> None:
    """The entry was made in admin: by the operator, with no key, in the given organization and project."""
    assert (entry.user, entry.api_key_mask) == (operator, "")
    assert (entry.organization_id, entry.project_id) == (organization_id, project_id)


class _FormFields(HTMLParser):
    """The values a browser would send for the admin's change form (`<form id="..._form">`)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.in_form = False
        self.data: dict[str, list[str]] = {}
        self.select: str | None = None
        self.textarea: str | None = None
        self.text: list[str] = []

    def add(self, name: str, value: str) -> None:
        if "__prefix__" not in name:  # the inline's template for rows added in the browser
            self.data.setdefault(name, []).append(value)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.in_form = attrs.get("id", "").endswith("_form")
        if not self.in_form or "disabled" in attrs or ("name" not in attrs and tag != "option"):
            return
        if tag == "input":
            kind = attrs.get("type", "text")
            if kind in ("submit", "button", "file", "image", "reset"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    self.add(attrs["name"], attrs.get("value") or "on")
                return
            self.add(attrs["name"], attrs.get("value") or "")
        elif tag == "select":
            self.select = attrs["name"]
        elif tag == "option" and self.select and "selected" in attrs:
            self.add(self.select, attrs.get("value") or "")
        elif tag == "textarea":
            self.textarea, self.text = attrs["name"], []

    def handle_endtag(self, tag):
        if tag == "form":
            self.in_form = False
        elif tag == "select":
            self.select = None
        elif tag == "textarea" and self.textarea:
            # A browser drops the one newline that follows <textarea>.
            self.add(self.textarea, "".join(self.text).removeprefix("\n"))
            self.textarea = None

    def handle_data(self, data):
        if self.textarea:
            self.text.append(data)


def change_form_data(client, url: str, **changes) -> dict:
    """The POST body of the change form at `url` submitted unchanged, apart from `changes`."""
    response = client.get(url)
    assert response.status_code == 200, url
    parser = _FormFields()
    parser.feed(response.content.decode())
    data = {name: values if len(values) > 1 else values[0] for name, values in parser.data.items()}
    for name, value in changes.items():
        if value is False:
            data.pop(name, None)
        else:
            data[name] = "on" if value is True else value
    return data


# Every admin page, filled as an operator sees it: one record of each registered model, with text as long as real
# records have, so that the pages are checked at their widest.

LONG = "Weekly active users by acquisition channel and signup cohort"


def admin_samples() -> dict:
    """One saved record of each model registered in admin, by model. A model registered later is covered through its
    app's `tests/<app>/factories.py` `<Model>Factory`, when there is one."""
    organization = OrganizationFactory(
        name="Northwind Traders International Holdings", slug="northwind-traders-international-holdings"
    )
    project = ProjectFactory(organization=organization, name=f"{LONG} (production)")
    user = UserFactory(
        email="alexandra.konstantinopoulou-whitfield@northwind-traders.example.com",
        first_name="Alexandra",
        last_name="Konstantinopoulou-Whitfield",
        current_organization=organization,
        current_project=project,
    )
    membership = MembershipFactory(user=user, organization=organization, level=Membership.Level.OWNER)
    invite = InviteFactory(
        organization=organization,
        created_by=user,
        target_email="maximilian.oberhauser-lindqvist@northwind-traders.example.com",
    )
    domain = DomainFactory(organization=organization, domain="analytics.eu-west-1.northwind-traders.example.com")
    key, _ = api_key_create(
        user=user,
        label=f"{LONG} exporter",
        scopes=[
            "dashboard:read",
            "insight:write",
            "plugin:read",
            "batch_export:write",
            "organization_member:read",
            "sharing_configuration:write",
        ],
    )
    dashboard = DashboardFactory(project=project, created_by=user, name=LONG, description=LONG * 3, tags=["growth"])
    views = {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}
    chart_tile = DashboardTileFactory(
        dashboard=dashboard, order=0, insight__project=project, insight__query=views, insight__name=f"{LONG} (views)"
    )
    text = DashboardTileFactory(dashboard=dashboard, order=1, text_tile=True, text__body=LONG * 4).text
    DashboardCollaboratorFactory(dashboard=dashboard, user=UserFactory())
    sharing, _ = sharing_configuration_get_or_create(actor=user, dashboard=dashboard)
    for day in range(3):
        EventFactory(
            project=project,
            event="$pageview",
            distinct_id=f"visitor-{day}-0190f5a2-7d4b-7c1e-9a57-3f1e8b2d4c6a",
            timestamp=timezone.now() - dt.timedelta(days=day),
            properties={"$current_url": f"https://www.northwind-traders.example.com/{LONG.replace(' ', '-').lower()}"},
        )
    export = BatchExportFactory(project=project, name=f"{LONG} to S3")
    run = BatchExportRunFactory(batch_export=export)
    BatchExportRunLogFactory(run=run, message=LONG * 3)
    backfill = BatchExportBackfillFactory(batch_export=export)
    plugin = PluginFactory(
        organization=organization, name=f"{LONG} plugin", url="https://plugins.example.com/" + "x" * 60
    )
    PluginSourceFileFactory(plugin=plugin)
    plugin_config = PluginConfigFactory(plugin=plugin, project=project)
    group = Group.objects.create(name="Operators of the northwind analytics workspace")

    activity = ActivityLog.objects.create(
        user=user,
        api_key_mask=key.mask_value,
        organization_id=organization.pk,
        project_id=project.pk,
        scope="Dashboard",
        item_id=str(dashboard.pk),
        activity="updated",
        detail={"name": LONG, "before": {"name": "Old"}, "after": {"name": LONG}},
    )
    samples = {
        Group: group,
        type(user): user,
        ActivityLog: activity,
        type(organization): organization,
        type(project): project,
        type(membership): membership,
        type(invite): invite,
        type(domain): domain,
        type(key): key,
        type(dashboard): dashboard,
        type(sharing): sharing,
        type(chart_tile.insight): chart_tile.insight,
        type(text): text,
        type(export): export,
        type(run): run,
        type(backfill): backfill,
        type(plugin): plugin,
        type(plugin_config): plugin_config,
        Event: Event.objects.filter(project=project).first(),
    }
    for model in admin.site._registry:
        if model in samples:
            continue
        try:
            factories = importlib.import_module(f"tests.{model._meta.app_label}.factories")
        except ImportError:
            continue
        factory_class = getattr(factories, f"{model.__name__}Factory", None)
        if factory_class is not None:
            samples[model] = factory_class()
    return samples


def admin_pages(samples: dict) -> list[str]:
    """The admin index, then each registered model's changelist and its sample's change page."""
    pages = [reverse("admin:index")]
    for model in sorted(admin.site._registry, key=lambda model: model._meta.label):
        pages.append(changelist_url(model))
        if model in samples:
            pages.append(change_url(samples[model]))
    return pages
