"""`manage.py embed_url`: a signed link a customer's developer can copy, with the properties it locks."""

import io
from urllib.parse import urlsplit

import jwt
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from dashboards.public.models import EmbedSecret
from dashboards.public.services import embed_secret_create
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from workspace.models import ActivityLog


def embed_url(*args) -> list[str]:
    out = io.StringIO()
    call_command("embed_url", *args, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def dashboard(project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Shop numbers")
    DashboardTileFactory(dashboard=dashboard, insight__name="Page views")
    return dashboard


def test_the_link_opens_the_dashboard_with_the_properties_locked(settings, dashboard, project, alice):
    settings.SITE_URL = "http://127.0.0.1:8010"
    secret, _ = embed_secret_create(actor=alice, project=project, name="Portal")
    lines = embed_url("--dashboard", str(dashboard.pk), "--property", "$browser=Chrome", "--property", "plan!=free")
    url = lines[-1]
    assert url.startswith("http://127.0.0.1:8010/embed/")
    assert secret.kid in lines[0]
    token = urlsplit(url).path.removeprefix("/embed/")
    assert jwt.get_unverified_header(token) == {"alg": "HS256", "typ": "JWT", "kid": secret.kid}
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["resource"] == {"dashboard": dashboard.pk}
    assert claims["locked"]["properties"] == [
        {"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"},
        {"key": "plan", "value": "free", "operator": "is_not", "type": "event"},
    ]
    response = Client().get(urlsplit(url).path)
    assert response.status_code == 200 and "Shop numbers" in response.content.decode()


def test_a_project_without_a_secret_gets_one_recorded_in_the_activity_log(dashboard, project):
    lines = embed_url("--dashboard", str(dashboard.pk), "--date-from=-30d", "--viewer-date-range")
    secret = EmbedSecret.objects.get(project=project)
    assert secret.kid in lines[0]
    entry = ActivityLog.objects.get(scope="EmbedSecret", item_id=str(secret.pk))
    assert entry.activity == "created" and entry.project_id == project.pk
    claims = jwt.decode(urlsplit(lines[-1]).path.removeprefix("/embed/"), options={"verify_signature": False})
    assert claims["locked"] == {"properties": [], "date_from": "-30d"} and claims["viewer_date_range"] is True


def test_an_insight_and_a_chosen_secret(dashboard, project, alice):
    chosen, _ = embed_secret_create(actor=alice, project=project, name="Chosen")
    embed_secret_create(actor=alice, project=project, name="Newest")
    insight = dashboard.tiles.get().insight
    lines = embed_url(
        "--insight",
        str(insight.pk),
        "--secret",
        chosen.kid,
        "--property-json",
        '{"key": "price", "operator": "gt", "value": 10}',
    )
    claims = jwt.decode(urlsplit(lines[-1]).path.removeprefix("/embed/"), options={"verify_signature": False})
    assert claims["resource"] == {"insight": insight.pk}
    assert claims["locked"]["properties"] == [{"key": "price", "value": 10, "operator": "gt", "type": "event"}]
    assert Client().get(urlsplit(lines[-1]).path).status_code == 200


@pytest.mark.parametrize(
    "args,message",
    [
        (["--dashboard", "999999"], "No dashboard 999999"),
        (["--property", "no-equals-sign"], "KEY=VALUE"),
        (["--property-json", '{"key": "x", "operator": "almost"}'], "not an event property filter"),
        (["--expires-in-hours", "25"], "at most 24"),
        (["--secret", "ek_nothing"], "no embed secret ek_nothing"),
    ],
)
def test_mistakes_are_explained(dashboard, args, message):
    if "--dashboard" not in args:
        args = ["--dashboard", str(dashboard.pk), *args]
    with pytest.raises(CommandError, match=message):
        embed_url(*args)


ENDPOINT_PARAMETERS = {
    "type": "object",
    "properties": {"country": {"type": "string", "enum": ["DE", "FR"]}, "min_n": {"type": "integer", "default": 0}},
    "required": ["country"],
}


@pytest.fixture
def endpoint(project, alice):
    from pipelines.endpoints.services import endpoint_create

    query = {
        "kind": "HogQLQuery",
        "query": "SELECT count() AS n FROM events WHERE properties.country = {variables.country} "
        "AND properties.n >= {variables.min_n}",
    }
    return endpoint_create(actor=alice, project=project, name="by-country", query=query, parameters=ENDPOINT_PARAMETERS)


def test_an_endpoints_link_locks_its_parameters(endpoint, project, alice):
    embed_secret_create(actor=alice, project=project, name="Portal")
    lines = embed_url(
        "--endpoint", "by-country", "--project", str(project.pk), "--parameter", "country=DE", "--parameter", "min_n=5"
    )
    claims = jwt.decode(urlsplit(lines[-1]).path.removeprefix("/embed/"), options={"verify_signature": False})
    assert claims["resource"] == {"endpoint": "by-country"}
    assert claims["locked"] == {"parameters": {"country": "DE", "min_n": 5}}
    body = Client().get(urlsplit(lines[-1]).path, {"format": "json", "country": "FR"}).json()
    assert body["parameters"] == {"country": "DE", "min_n": 5}

    pinned = embed_url("--endpoint", "by-country", "--project", str(project.pk), "--endpoint-version", "1")
    claims = jwt.decode(urlsplit(pinned[-1]).path.removeprefix("/embed/"), options={"verify_signature": False})
    assert claims["resource"] == {"endpoint": "by-country", "version": 1} and claims["locked"] == {"parameters": {}}


@pytest.mark.parametrize(
    "args,message",
    [
        (["--endpoint", "by-country"], "needs --project"),
        (["--endpoint", "nope", "--project", "{project}"], "has no endpoint 'nope'"),
        (["--endpoint", "by-country", "--project", "{project}", "--parameter", "country=ES"], "locked parameter"),
        (["--endpoint", "by-country", "--project", "{project}", "--parameter", "nothing"], "NAME=VALUE"),
        (["--endpoint", "by-country", "--project", "{project}", "--endpoint-version", "7"], "no version 7"),
        (["--endpoint", "by-country", "--project", "{project}", "--property", "a=b"], "parameters only"),
        (["--dashboard", "{dashboard}", "--parameter", "country=DE"], "for an --endpoint"),
    ],
)
def test_mistakes_with_an_endpoint_are_explained(endpoint, dashboard, project, args, message):
    args = [arg.format(project=project.pk, dashboard=dashboard.pk) for arg in args]
    with pytest.raises(CommandError, match=message):
        embed_url(*args)
