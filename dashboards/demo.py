"""Demo records for `manage.py seed_demo`: a pinned dashboard from a bundled template, so the first GET has tiles."""

from dashboards.services import dashboard_create
from dashboards.template_library import bundled_templates

DEMO_TEMPLATE = "product-analytics"


def create_demo_data(*, user, organization, project) -> None:
    dashboard_create(actor=user, project=project, pinned=True, template=bundled_templates()[DEMO_TEMPLATE])
