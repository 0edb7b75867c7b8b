"""Every list filter refuses a value it cannot read with a 400 naming the parameter (issue 9).

Before, `?paused=null` listed everything: django-filter's boolean reads anything but true/false as no filter.
"""

import django_filters
import pytest
from django.urls import get_resolver
from django.urls.resolvers import URLPattern, URLResolver

from tests.dashboards.factories import DashboardFactory
from tests.pipelines.factories import BatchExportFactory, PluginFactory
from workspace.api.filters import FilterSet, StrictBooleanFilter

UNREADABLE = [
    ("/api/projects/{project}/dashboards/", "pinned", "null", "invalid"),
    ("/api/projects/{project}/dashboards/", "pinned", "maybe", "invalid"),
    ("/api/projects/{project}/dashboards/", "created_by", "not-a-uuid", "invalid"),
    ("/api/projects/{project}/dashboards/", "search", "a\x00b", "null_characters_not_allowed"),
    ("/api/organizations/{organization}/batch_exports/", "paused", "null", "invalid"),
    ("/api/organizations/{organization}/batch_exports/", "paused", "yes please", "invalid"),
    ("/api/organizations/{organization}/batch_exports/", "interval", "fortnight", "invalid_choice"),
    ("/api/organizations/{organization}/batch_exports/", "destination_type", "FTP", "invalid_choice"),
    ("/api/organizations/{organization}/pipeline_destinations/", "is_global", "null", "invalid"),
    ("/api/organizations/{organization}/pipeline_frontend_apps/", "is_global", "2", "invalid"),
    ("/api/organizations/{organization}/pipeline_import_apps/", "plugin_type", "remote", "invalid_choice"),
    ("/api/organizations/{organization}/members/", "level", "9", "invalid_choice"),
    ("/api/organizations/{organization}/members/", "level", "owner", "invalid_choice"),
    ("/api/organizations/{organization}/members/", "email", "a\x00@example.com", "null_characters_not_allowed"),
]


@pytest.mark.parametrize(("path", "parameter", "value", "code"), UNREADABLE)
def test_an_unreadable_filter_value_is_a_400_naming_the_parameter(
    key_client, organization, project, path, parameter, value, code
):
    url = path.format(organization=organization.id, project=project.id)
    response = key_client("*").get(url, {parameter: value})
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["type"], body["code"], body["attr"]) == ("validation_error", code, parameter)


@pytest.mark.parametrize(("value", "expected"), [("true", ["paused"]), ("FALSE", ["running"]), ("1", ["paused"])])
def test_booleans_read_true_and_false(key_client, organization, project, value, expected):
    BatchExportFactory(project=project, name="paused", paused=True)
    BatchExportFactory(project=project, name="running", paused=False)
    response = key_client("batch_export:read").get(
        f"/api/organizations/{organization.id}/batch_exports/", {"paused": value}
    )
    assert [item["name"] for item in response.json()["results"]] == expected


def test_an_empty_value_means_no_filter(key_client, organization, project):
    DashboardFactory(project=project, pinned=True)
    DashboardFactory(project=project, pinned=False)
    PluginFactory(organization=organization)
    client = key_client("*")
    assert client.get(f"/api/projects/{project.id}/dashboards/?pinned=").json()["count"] == 2
    response = client.get(f"/api/organizations/{organization.id}/pipeline_destinations/?is_global=")
    assert response.json()["count"] == 1


def filtersets():
    """Every FilterSet a route of the API uses."""
    found = set()
    pending = list(get_resolver().url_patterns)
    while pending:
        pattern = pending.pop()
        if isinstance(pattern, URLResolver):
            pending.extend(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            filterset = getattr(getattr(pattern.callback, "cls", None), "filterset_class", None)
            if filterset is not None:
                found.add(filterset)
    return sorted(found, key=lambda cls: cls.__name__)


def test_every_filterset_is_strict():
    """A new FilterSet must subclass workspace.api.filters.FilterSet and declare booleans as StrictBooleanFilter."""
    found = filtersets()
    assert len(found) >= 4
    for filterset in found:
        assert issubclass(filterset, FilterSet), filterset
        for name, declared in filterset.base_filters.items():
            if isinstance(declared, django_filters.BooleanFilter):
                assert isinstance(declared, StrictBooleanFilter), f"{filterset.__name__}.{name}"
