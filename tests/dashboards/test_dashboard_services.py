"""Services and the template schema, below the API."""

import copy

import pytest

from dashboards.core.models import Dashboard
from dashboards.core.services import clean_tags, dashboard_create, dashboard_set_tags
from dashboards.core.template_library import TemplateError, bundled_templates, validate_template
from tests.dashboards.factories import DashboardFactory


def test_clean_tags_trims_drops_blanks_and_duplicates():
    assert clean_tags([" a", "b ", "a", "  ", "c"]) == ["a", "b", "c"]


def test_set_tags_replaces_the_tag_rows(project):
    dashboard = DashboardFactory(project=project, tags=["old", "kept"])

    dashboard_set_tags(dashboard=dashboard, tags=["kept", "new"])

    assert dashboard.tag_names == ["kept", "new"]


def test_template_creation_does_not_change_the_cached_template(project, alice):
    before = copy.deepcopy(bundled_templates()["onboarding-funnel"])

    dashboard = dashboard_create(actor=alice, project=project, template=bundled_templates()["onboarding-funnel"])
    insight = dashboard.tiles.exclude(insight=None).first().insight
    insight.query["kind"] = "Changed"
    insight.save()
    tile = dashboard.tiles.first()
    tile.layouts["sm"]["w"] = 99
    tile.save()

    assert bundled_templates()["onboarding-funnel"] == before


def test_explicit_null_filters_win_over_the_templates(project, alice):
    dashboard = dashboard_create(
        actor=alice, project=project, filters=None, template=bundled_templates()["product-analytics"]
    )

    assert Dashboard.objects.get(pk=dashboard.pk).filters is None


@pytest.mark.parametrize("slug", sorted(bundled_templates()))
def test_bundled_templates_follow_the_schema_with_several_tiles(slug):
    template = bundled_templates()[slug]

    assert validate_template(template) is template
    assert len(template["tiles"]) >= 3


def test_validate_template_reports_the_path_of_the_problem():
    template = copy.deepcopy(bundled_templates()["website-traffic"])
    template["tiles"][1]["layouts"] = {"sm": {"x": 0, "y": 0, "w": "wide", "h": 1}}

    with pytest.raises(TemplateError) as raised:
        validate_template(template)

    assert raised.value.path == ("tiles", "1", "layouts", "sm", "w")
    assert raised.value.message.startswith("tiles/1/layouts/sm/w: ")
