"""Demo records for `manage.py seed_demo`: a pinned dashboard from a bundled template, so the first GET has tiles."""

from dashboards.services import dashboard_create
from dashboards.templates import bundled_templates

DEMO_TEMPLATE = "product-analytics"


def create_demo_data(*, user, organization, project) -> None:
    dashboard_create(project=project, user=user, pinned=True, template=bundled_templates()[DEMO_TEMPLATE])
