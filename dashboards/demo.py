"""Demo records for `manage.py seed_demo`: a pinned dashboard from a bundled template, so the first GET has tiles,
with a funnel beside the template's trends and retention, over the demo shop's events (pipelines.demo)."""

from dashboards.services import dashboard_create
from dashboards.template_library import bundled_templates

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


def create_demo_data(*, user, organization, project) -> None:
    template = bundled_templates()[DEMO_TEMPLATE]
    demo = {**template, "tiles": [*template["tiles"], DEMO_FUNNEL]}
    dashboard_create(actor=user, project=project, pinned=True, template=demo)
