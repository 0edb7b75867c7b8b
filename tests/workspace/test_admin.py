"""Admin pages render for an operator, without N+1 in changelists; key issuance shows the plaintext once and takes
its scopes from a grid; users are picked by autocomplete; insights and dashboards show their charts."""

import datetime as dt
import re
from html import unescape

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.widgets import AutocompleteSelect
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from apikeys.models import PersonalAPIKey
from apikeys.scopes import ALL_SCOPES, OBJECTS, validate_scopes
from apikeys.services import api_key_create, hash_key
from organizations.models import Membership
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from tests.organizations.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from tests.pipelines.factories import EventFactory
from tests.workspace.admin_pages import admin_pages, admin_samples, change_url
from tests.workspace.factories import UserFactory


@pytest.fixture
def operator(db, client):
    user = UserFactory(email="operator@example.com", is_staff=True, is_superuser=True)
    client.force_login(user)
    return client


CHANGELISTS = [
    "admin:workspace_user_changelist",
    "admin:workspace_activitylog_changelist",
    "admin:organizations_organization_changelist",
    "admin:organizations_project_changelist",
    "admin:apikeys_personalapikey_changelist",
    "admin:pipelines_event_changelist",
]


@pytest.mark.parametrize("name", CHANGELISTS)
def test_changelists_render_with_a_flat_query_count(operator, name, django_assert_max_num_queries):
    def populate(count):
        for _ in range(count):
            organization = OrganizationFactory()
            ProjectFactory(organization=organization)
            user = UserFactory(current_organization=organization)
            MembershipFactory(user=user, organization=organization, level=Membership.Level.OWNER)
            api_key_create(user=user, label="k", scopes=["*"])

    populate(2)
    with django_assert_max_num_queries(12) as few:
        assert operator.get(reverse(name)).status_code == 200
    populate(20)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert operator.get(reverse(name)).status_code == 200


def test_issuing_a_key_in_admin_shows_the_plaintext_once(operator, alice):
    response = operator.post(
        reverse("admin:apikeys_personalapikey_add"),
        {"user": alice.pk, "label": "From admin", "scopes": ["dashboard:read", "plugin:write"]},
        follow=True,
    )
    assert response.status_code == 200
    key = PersonalAPIKey.objects.get(label="From admin")
    plaintext = re.search(r"phx_[0-9A-Za-z]{49}", response.content.decode()).group(0)
    assert key.secure_value == hash_key(plaintext)
    assert key.scopes == ["dashboard:read", "plugin:write"]
    listing = operator.get(reverse("admin:apikeys_personalapikey_changelist")).content.decode()
    assert plaintext not in listing
    assert key.secure_value not in listing
    assert key.mask_value in listing


def test_admin_rejects_unknown_scopes(operator, alice):
    response = operator.post(
        reverse("admin:apikeys_personalapikey_add"), {"user": alice.pk, "label": "Bad", "scopes": ["nope:read"]}
    )
    assert response.status_code == 200
    assert not PersonalAPIKey.objects.filter(label="Bad").exists()


def test_revoke_action(operator, alice):
    key, plaintext = api_key_create(user=alice, label="To revoke", scopes=["*"])
    response = operator.post(
        reverse("admin:apikeys_personalapikey_changelist"),
        {"action": "revoke", "_selected_action": [key.pk]},
        follow=True,
    )
    assert response.status_code == 200
    key.refresh_from_db()
    assert key.revoked_at is not None
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert client.get("/api/organizations/").status_code == 401


def test_landing_page_links_docs_and_admin(client, db):
    content = client.get("/").content.decode()
    assert 'href="/api/docs/"' in content and 'href="/admin/"' in content


@pytest.mark.parametrize("path", ["/", "/api/redoc/"])
def test_the_service_s_own_pages_fit_a_phone_s_width(client, db, path):
    """Without a viewport tag a phone lays a page out 980 px wide and shrinks it."""
    content = client.get(path).content.decode()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in content


def test_every_registered_model_has_a_sample_and_each_admin_page_renders(operator):
    samples = admin_samples()
    assert [model._meta.label for model in admin.site._registry if model not in samples] == []
    pages = admin_pages(samples)
    assert len(pages) == 1 + 2 * len(admin.site._registry)
    for page in pages:
        response = operator.get(page)
        assert response.status_code == 200, page
        assert b"<script>" not in response.content, f"{page} has an inline script, which the policy refuses"


# Users are picked by autocomplete (a search over the user admin's search_fields), never from a list of every user.


def user_pickers(request) -> list[tuple[str, str, object]]:
    """(admin class, field, widget) for each field of an add form or inline row that picks a user."""
    found = []
    for model_admin in admin.site._registry.values():
        if not model_admin.has_add_permission(request):
            continue
        forms = [(model_admin, model_admin.get_form(request))]
        forms += [(inline, inline.get_formset(request).form) for inline in model_admin.get_inline_instances(request)]
        for each, form in forms:
            for name, field in form.base_fields.items():
                queryset = getattr(field, "queryset", None)
                if queryset is not None and queryset.model._meta.label == settings.AUTH_USER_MODEL:
                    found.append((type(each).__name__, name, field.widget))
    return found


def test_every_user_picked_in_admin_is_picked_by_autocomplete(rf, db):
    request = rf.get("/admin/")
    request.user = UserFactory(is_staff=True, is_superuser=True)
    pickers = user_pickers(request)
    assert {(admin_name, name) for admin_name, name, _ in pickers} >= {
        ("PersonalAPIKeyAdmin", "user"),
        ("MembershipAdmin", "user"),
        ("MembershipInline", "user"),
        ("InviteAdmin", "created_by"),
        ("InviteAdmin", "accepted_by"),
        ("DashboardAdmin", "created_by"),
        ("DashboardCollaboratorInline", "user"),
        ("SharingConfigurationAdmin", "enabled_by"),
    }
    assert [
        (admin_name, name)
        for admin_name, name, widget in pickers
        if not isinstance(getattr(widget, "widget", widget), AutocompleteSelect)
    ] == []


def test_the_key_form_searches_users_by_email(operator, alice, bob):
    page = operator.get(reverse("admin:apikeys_personalapikey_add")).content.decode()
    assert 'class="admin-autocomplete' in page and 'name="user"' in page
    response = operator.get(
        reverse("admin:autocomplete"),
        {"term": "alice@", "app_label": "apikeys", "model_name": "personalapikey", "field_name": "user"},
    )
    assert response.status_code == 200
    assert response.json()["results"] == [{"id": str(alice.pk), "text": "alice@example.com"}]


# The key form's scopes: a grid of one row per object; what is stored is what the API and the command store.

ADD_KEY = "admin:apikeys_personalapikey_add"


def test_the_key_form_shows_a_row_per_scope_object_with_read_and_write_boxes(operator):
    page = operator.get(reverse(ADD_KEY)).content.decode()
    grid = re.search(r'<table class="scope-grid".*?</table>', page, re.S).group(0)
    rows = re.findall(r"<tr.*?</tr>", grid, re.S)
    assert len(rows) == 1 + len(OBJECTS)
    assert re.findall(r'name="scopes" value="([^"]+)"', rows[0]) == ["*"] and "all" in rows[0]
    for obj, row in zip(OBJECTS, rows[1:], strict=True):
        assert f"<code>{obj}</code>" in row
        assert re.findall(r'name="scopes" value="([^"]+)"', row) == [f"{obj}:read", f"{obj}:write"]
    assert re.findall(r'value="([^"]+)"', grid) == ["*", *ALL_SCOPES]


@pytest.mark.parametrize(
    "ticked",
    [["*"], ["insight:write"], ["dashboard:read", "dashboard:write", "plugin:read"], ["*", "project:read"]],
)
def test_the_key_form_stores_the_scopes_as_the_api_does(operator, alice, ticked):
    response = operator.post(reverse(ADD_KEY), {"user": alice.pk, "label": "Grid", "scopes": ticked})
    assert response.status_code == 302, response.content.decode()[:2000]
    key = PersonalAPIKey.objects.get(label="Grid")
    assert key.scopes == validate_scopes(ticked) == ticked


def test_the_key_form_ticks_again_what_was_sent_when_it_is_refused(operator, alice):
    response = operator.post(reverse(ADD_KEY), {"user": alice.pk, "label": "", "scopes": ["plugin:write"]})
    page = response.content.decode()
    assert response.status_code == 200 and not PersonalAPIKey.objects.exists()
    assert re.search(r'value="plugin:write"[^>]*checked', page)
    assert not re.search(r'value="plugin:read"[^>]*checked', page)


@pytest.mark.parametrize(
    ("scopes", "message"),
    [
        (["nope:read"], "Unknown scope 'nope:read'. Use '*' or '<object>:<read|write>'"),
        ([], "This field is required."),
    ],
)
def test_the_key_form_shows_scope_errors_in_the_form(operator, alice, scopes, message):
    response = operator.post(reverse(ADD_KEY), {"user": alice.pk, "label": "Bad", "scopes": scopes})
    assert response.status_code == 200
    assert not PersonalAPIKey.objects.filter(label="Bad").exists()
    errors = re.search(
        r'<div class="form-row errors field-scopes">.*?<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>',
        response.content.decode(),
        re.S,
    )
    assert errors and message in unescape(errors.group(1)), response.content.decode()[:3000]


# Charts of insights on their admin pages.

VIEWS = {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}


def pageviews(project, days: int = 3) -> None:
    for day in range(days):
        EventFactory(project=project, event="$pageview", timestamp=timezone.now() - dt.timedelta(days=day))


def charts_of(page: str) -> list[str]:
    return re.findall(r'<section class="admin-chart".*?</section>', page, re.S)


def test_the_insight_page_charts_its_result(operator, project):
    insight = InsightFactory(project=project, query=VIEWS, name="Views")
    pageviews(project)
    [chart] = charts_of(operator.get(change_url(insight)).content.decode())
    assert '<svg class="chart chart-line"' in chart
    assert len(re.search(r'<polyline class="series" points="([^"]+)"', chart).group(1).split()) == 8
    assert "<caption>Views</caption>" in chart  # the numbers, as a table


def test_the_dashboard_page_charts_each_tile_and_a_failing_tile_fails_alone(operator, project, monkeypatch):
    dashboard = DashboardFactory(project=project)
    shown = DashboardTileFactory(dashboard=dashboard, order=0, insight__project=project, insight__query=VIEWS)
    broken = DashboardTileFactory(dashboard=dashboard, order=1, insight__project=project, insight__query=VIEWS)
    refused = DashboardTileFactory(
        dashboard=dashboard, order=2, insight__project=project, insight__query={"kind": "NoSuchQuery"}
    )
    DashboardTileFactory(dashboard=dashboard, order=3, text_tile=True)
    DashboardTileFactory(dashboard=dashboard, order=4, deleted=True, insight__project=project)
    pageviews(project)
    from dashboards import admin as dashboards_admin

    draw = dashboards_admin.chart

    def chart(insight, result):
        if insight.pk == broken.insight_id:
            # A statement the database refuses: on PostgreSQL it spoils the transaction unless undone alone.
            with connection.cursor() as cursor:
                cursor.execute("SELECT * FROM no_such_table")
        return draw(insight, result)

    monkeypatch.setattr(dashboards_admin, "chart", chart)
    response = operator.get(change_url(dashboard))
    assert response.status_code == 200
    charts = charts_of(response.content.decode())
    assert [re.search(r'data-insight="(\d+)"', chart).group(1) for chart in charts] == [
        str(tile.insight_id) for tile in (shown, broken, refused)
    ]
    assert "<polyline" in charts[0]
    assert "could not be drawn" in unescape(charts[1]) and "<svg" not in charts[1]
    assert "Unknown query kind 'NoSuchQuery'" in unescape(charts[2]) and "<svg" not in charts[2]
    assert f'href="{change_url(shown.insight)}"' in charts[0]
