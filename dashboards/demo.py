"""Demo records for `manage.py seed_demo`: a pinned dashboard from a bundled template, so the first GET has tiles,
with a funnel beside the template's trends and retention, over the demo shop's events (pipelines.demo); shared, so
that its public page is there to open; and an embed secret whose pages a local page on port 8080 may frame, so that
`manage.py embed_url` signs an embed of it for one customer's visitors at once (README, "Embedding a dashboard").

`demo_lines` is what seed_demo prints of them: the shared page's link, and an embed of the dashboard for the demo
shop's Chrome visitors with the command that made it."""

import io

from django.conf import settings
from django.core.management import call_command

from dashboards.core.models import Dashboard, SharingConfiguration
from dashboards.core.services import dashboard_create
from dashboards.core.template_library import bundled_templates
from dashboards.public.services import (
    embed_secret_create,
    sharing_configuration_get_or_create,
    sharing_configuration_update,
)

DEMO_TEMPLATE = "product-analytics"
DEMO_FUNNEL = {
    "type": "INSIGHT",
    "name": "Page view to purchase",
    "description": "People who viewed a page, then signed up, then bought, within 14 days.",
    "query": {
        "kind": "InsightVizNode",
        "source": {
            "kind": "FunnelsQuery",
            "series": [
                {"kind": "EventsNode", "event": "$pageview"},
                {"kind": "EventsNode", "event": "signed_up"},
                {"kind": "EventsNode", "event": "purchase"},
            ],
            "funnelsFilter": {
                "funnelOrderType": "ordered",
                "funnelWindowInterval": 14,
                "funnelWindowIntervalUnit": "day",
            },
            "dateRange": {"date_from": "-30d"},
        },
    },
    "filters": {},
    "layouts": {"sm": {"x": 0, "y": 12, "w": 12, "h": 5}},
    "color": "purple",
}


# The sites that may frame the demo's embeds: a page served on this machine, as README's example serves one.
DEMO_EMBED_ORIGINS = ["http://127.0.0.1:8080", "http://localhost:8080"]
DEMO_EMBED_PROPERTY = "$browser=Chrome"


def create_demo_data(*, user, organization, project) -> None:
    template = bundled_templates()[DEMO_TEMPLATE]
    demo = {**template, "tiles": [*template["tiles"], DEMO_FUNNEL]}
    dashboard = dashboard_create(actor=user, project=project, pinned=True, template=demo)
    configuration, _ = sharing_configuration_get_or_create(actor=user, dashboard=dashboard)
    sharing_configuration_update(actor=user, configuration=configuration, enabled=True)
    embed_secret_create(actor=user, project=project, name="Demo portal", allowed_origins=DEMO_EMBED_ORIGINS)


def demo_lines(*, project) -> list[str]:
    """The demo dashboard's shared page and an embed of it for Chrome visitors (signed now, for 24 hours), as the
    lines seed_demo prints; none when the project has no shared dashboard (the demo's was unshared or deleted)."""
    dashboard = (
        Dashboard.objects.filter(
            project=project,
            deleted=False,
            sharing_configuration__in=SharingConfiguration.objects.live().filter(password_required=False),
        )
        .select_related("sharing_configuration")
        .order_by("-pinned", "id")
        .first()
    )
    if dashboard is None:
        return []
    site = settings.SITE_URL.rstrip("/")
    lines = [f"Shared page:  {site}/shared/{dashboard.sharing_configuration.access_token}/  ({dashboard.name})"]
    if project.embed_secrets.exists():
        command = f"manage.py embed_url --dashboard {dashboard.pk} --property '{DEMO_EMBED_PROPERTY}'"
        out = io.StringIO()
        call_command("embed_url", "--dashboard", str(dashboard.pk), "--property", DEMO_EMBED_PROPERTY, stdout=out)
        lines.append(f"Embed:        {out.getvalue().splitlines()[-1]}")
        lines.append(f"              (Chrome visitors only, for 24 hours; made with `{command}`)")
    return lines
