"""`/embed/<token>`: a token signed as a customer's server signs it shows what it locks, and nothing a URL says widens
that; every token that grants nothing is the same 404 (DECISIONS.md §19, "Signed embeds")."""

import datetime as dt
from types import SimpleNamespace

import jwt
import pytest
from django.test import Client
from django.utils import timezone

from dashboards.core.results import refresh_period_start
from dashboards.public.embed_pages import locked_statement
from dashboards.public.pages import SharedPageViewThrottle
from dashboards.public.services import embed_secret_create, embed_secret_delete, embed_secret_rotate
from pipelines.query import runner
from tests.dashboards.factories import (
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
    SharingConfigurationFactory,
)
from tests.pipelines.factories import EventFactory

PAGEVIEWS = {
    "kind": "InsightVizNode",
    "source": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}],
        "interval": "day",
        "dateRange": {"date_from": "-14d"},
    },
}
CHROME = [{"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}]


def total(tile: dict) -> int:
    return sum(series["count"] for series in tile["insight"]["result"])


@pytest.fixture
def portal(project, alice):
    """An embed secret framed by the customer's portal, and the secret itself."""
    return embed_secret_create(
        actor=alice, project=project, name="Portal", allowed_origins=["https://portal.example.com"]
    )


@pytest.fixture
def dashboard(project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Shop numbers")
    DashboardTileFactory(dashboard=dashboard, insight__name="Page views", insight__query=PAGEVIEWS)
    now = timezone.now()
    # Chrome: 3 views a day ago, 2 ten days ago; Firefox: 4 a day ago.
    for days, browser, count in [(1, "Chrome", 3), (10, "Chrome", 2), (1, "Firefox", 4)]:
        for _ in range(count):
            EventFactory(project=project, timestamp=now - dt.timedelta(days=days), properties={"$browser": browser})
    return dashboard


def sign(secret, raw_secret, *, resource=None, locked=None, exp_in=dt.timedelta(hours=1), headers=None, **claims):
    payload = {
        "resource": resource if resource is not None else {"dashboard": claims.pop("dashboard_id")},
        "locked": locked if locked is not None else {"properties": CHROME},
        "exp": int((timezone.now() + exp_in).timestamp()),
        **claims,
    }
    return jwt.encode(payload, raw_secret, algorithm="HS256", headers={"kid": secret.kid, **(headers or {})})


def get(token: str, **params):
    return Client().get(f"/embed/{token}", params)


class TestThePage:
    def test_a_signed_token_shows_the_dashboard_framed_by_its_origins_only(self, portal, dashboard):
        secret, raw = portal
        response = get(sign(secret, raw, dashboard_id=dashboard.pk))
        assert response.status_code == 200
        html = response.content.decode()
        assert "Shop numbers" in html and "Page views" in html
        policy = dict((part.split()[0], part.split()[1:]) for part in response["Content-Security-Policy"].split("; "))
        assert policy["frame-ancestors"] == ["https://portal.example.com"]
        assert policy["script-src"] == ["'self'"]  # the rest of the HTML policy holds
        assert "X-Frame-Options" not in response
        assert response["Referrer-Policy"] == "no-referrer"

    def test_a_secret_without_origins_may_be_framed_nowhere(self, project, alice, dashboard):
        secret, raw = embed_secret_create(actor=alice, project=project, name="Nowhere")
        response = get(sign(secret, raw, dashboard_id=dashboard.pk))
        assert response.status_code == 200
        assert "frame-ancestors 'none'" in response["Content-Security-Policy"]

    def test_json_gives_the_same_tiles_with_the_locked_properties_anded(self, portal, dashboard):
        secret, raw = portal
        response = get(sign(secret, raw, dashboard_id=dashboard.pk), format="json")
        assert response.status_code == 200
        body = response.json()
        assert body["resource"] == {"dashboard": dashboard.pk} and body["name"] == "Shop numbers"
        assert body["locked"]["properties"] == CHROME
        [tile] = body["tiles"]
        assert tile["insight"]["name"] == "Page views" and tile["insight"]["error"] is None
        assert total(tile) == 5  # Chrome's only, not Firefox's 4

    def test_an_insight_is_embedded_alone(self, portal, project, dashboard):
        secret, raw = portal
        insight = dashboard.tiles.get().insight
        body = get(sign(secret, raw, resource={"insight": insight.pk}), format="json").json()
        assert body["resource"] == {"insight": insight.pk}
        [tile] = body["tiles"]
        assert total(tile) == 5

    def test_the_locked_dates_are_in_force(self, portal, dashboard):
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": CHROME, "date_from": "-3d"})
        [tile] = get(token, format="json").json()["tiles"]
        assert total(tile) == 3  # the views of ten days ago are outside

    def test_results_are_cached_per_effective_query(self, portal, dashboard):
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk)
        assert get(token, format="json").json()["tiles"][0]["insight"]["is_cached"] is False
        assert get(token, format="json").json()["tiles"][0]["insight"]["is_cached"] is True
        firefox = [{"key": "$browser", "value": "Firefox"}]
        other = sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": firefox})
        [tile] = get(other, format="json").json()["tiles"]
        assert tile["insight"]["is_cached"] is False and total(tile) == 4

    def test_a_hogql_tile_shows_nothing_when_the_embed_locks_properties(self, portal, project, dashboard):
        secret, raw = portal
        DashboardTileFactory(
            dashboard=dashboard,
            insight__name="Every event",
            insight__query={"kind": "HogQLQuery", "query": "SELECT count() FROM events"},
        )
        token = sign(secret, raw, dashboard_id=dashboard.pk)
        tiles = get(token, format="json").json()["tiles"]
        hogql = next(tile for tile in tiles if tile["insight"]["name"] == "Every event")
        assert hogql["insight"]["result"] is None and "cannot be limited" in hogql["insight"]["error"]
        assert hogql["insight"]["computing"] is False and hogql["insight"]["stale"] is False
        page = get(token)
        assert page.status_code == 200 and "Every event" in page.content.decode() and "Refresh" not in page

    def test_a_hogql_tile_says_on_the_page_why_it_has_no_number(self, portal, project, dashboard):
        """Issue 51: the tile read "No data", as if the customer had none."""
        secret, raw = portal
        DashboardTileFactory(
            dashboard=dashboard,
            insight__name="Every event",
            insight__query={"kind": "HogQLQuery", "query": "SELECT count() FROM events"},
        )
        html = get(sign(secret, raw, dashboard_id=dashboard.pk)).content.decode()
        tile = html.split("<h2>Every event</h2>", 1)[1].split("</li>", 1)[0]
        assert "A HogQL query cannot be limited to $browser = Chrome, so this tile shows no number here." in tile
        assert "No data" not in tile and "computed" not in tile
        # A tile the lock holds keeps its chart and its line of when it was computed.
        views = html.split("<h2>Page views</h2>", 1)[1].split("</li>", 1)[0]
        assert "<svg" in views and "computed" in views and "cannot be limited" not in views

    def test_the_page_states_the_properties_it_locks(self, portal, dashboard):
        secret, raw = portal
        locked = [*CHROME, {"key": "plan", "value": ["pro", "team"], "operator": "exact", "type": "event"}]
        html = get(sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": locked})).content.decode()
        header = html.split("<header>", 1)[1].split("</header>", 1)[0]
        assert '<p class="locked">Only: $browser = Chrome and plan = pro or team</p>' in header

    def test_a_page_that_locks_no_property_states_none(self, portal, dashboard):
        secret, raw = portal
        html = get(sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": []})).content.decode()
        assert "Only:" not in html and 'class="locked"' not in html

    def test_the_shared_page_states_no_lock(self, dashboard):
        sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)
        html = Client().get(f"/shared/{sharing.access_token}").content.decode()
        assert "Page views" in html and "Only:" not in html

    def test_an_allowed_origin_may_read_the_json(self, portal, dashboard):
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk)
        allowed = Client().get(f"/embed/{token}", {"format": "json"}, HTTP_ORIGIN="https://portal.example.com")
        assert allowed["Access-Control-Allow-Origin"] == "https://portal.example.com"
        other = Client().get(f"/embed/{token}", {"format": "json"}, HTTP_ORIGIN="https://evil.example")
        assert "Access-Control-Allow-Origin" not in other

    def test_views_are_throttled_per_address(self, portal, dashboard, monkeypatch):
        monkeypatch.setattr(SharedPageViewThrottle, "THROTTLE_RATES", {"shared_page_view": "2/minute"})
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk)
        assert [get(token).status_code for _ in range(3)] == [200, 200, 429]
        response = get("not-a-token", format="json")
        assert response.status_code == 429 and int(response["Retry-After"]) >= 1
        assert response.json()["code"] == "throttled"


class TestNothingWidensTheLocks:
    @pytest.mark.parametrize(
        "params",
        [
            {"properties": '[{"key": "$browser", "value": "Firefox"}]'},
            {"properties": "[]", "filters": '{"properties": []}'},
            {"$browser": "Firefox", "locked": "{}", "refresh": "force_blocking"},
            {"date_from": "-90d"},
            {"date_from": "all", "date_to": "2099-01-01"},
        ],
    )
    def test_no_query_parameter_changes_what_is_shown(self, portal, dashboard, params):
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": CHROME, "date_from": "-3d"})
        [plain] = get(token, format="json").json()["tiles"]
        [tried] = get(token, format="json", **params).json()["tiles"]
        assert total(tried) == total(plain) == 3

    def test_a_viewer_range_stays_inside_the_locked_one(self, portal, dashboard):
        secret, raw = portal
        token = sign(
            secret,
            raw,
            dashboard_id=dashboard.pk,
            locked={"properties": CHROME, "date_from": "-5d"},
            viewer_date_range=True,
        )
        wider = get(token, format="json", date_from="-30d").json()
        assert wider["date_range"]["note"]  # says the range was narrowed
        assert total(wider["tiles"][0]) == 3
        narrower = get(token, format="json", date_from="-48h").json()
        assert narrower["date_range"]["note"] is None and narrower["date_range"]["date_from"] == "-48h"
        assert total(narrower["tiles"][0]) == 3
        unoffered = get(token, format="json", date_from="-2d").json()  # snapped to the offered range nearest it
        assert "nearest" in unoffered["date_range"]["note"] and unoffered["date_range"]["date_from"] == "-48h"
        older = get(token, format="json", date_from="-30d", date_to="-7d").json()
        assert older["date_range"]["note"] and total(older["tiles"][0]) == 3

    def test_without_the_tokens_leave_a_viewer_range_is_ignored(self, portal, dashboard):
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": CHROME, "date_from": "-5d"})
        body = get(token, format="json", date_from="-2d").json()
        assert (body["date_range"]["date_from"], body["date_range"]["date_to"]) == ("-5d", None)
        assert body["date_range"]["note"] is None


def refused_tokens(secret, raw, dashboard, other_dashboard) -> dict[str, str]:
    """Every kind of token that grants nothing, by reason."""
    good = {"resource": {"dashboard": dashboard.pk}, "locked": {"properties": CHROME}}
    hour = int((timezone.now() + dt.timedelta(hours=1)).timestamp())
    headers = {"kid": secret.kid}
    return {
        "expired": sign(secret, raw, dashboard_id=dashboard.pk, exp_in=-dt.timedelta(seconds=5)),
        "expiry more than a day ahead": sign(secret, raw, dashboard_id=dashboard.pk, exp_in=dt.timedelta(hours=25)),
        "no expiry": jwt.encode(good, raw, algorithm="HS256", headers=headers),
        "not a token": "not-a-token",
        "three parts of nothing": "a.b.c",
        "alg none": jwt.encode({**good, "exp": hour}, None, algorithm="none", headers=headers),
        "another algorithm": jwt.encode({**good, "exp": hour}, raw * 2, algorithm="HS512", headers=headers),
        "wrong secret": jwt.encode({**good, "exp": hour}, "es_" + "x" * 43, algorithm="HS256", headers=headers),
        "unknown kid": jwt.encode({**good, "exp": hour}, raw, algorithm="HS256", headers={"kid": "ek_unknown"}),
        "no kid": jwt.encode({**good, "exp": hour}, raw, algorithm="HS256"),
        "another project's dashboard": sign(secret, raw, dashboard_id=other_dashboard.pk),
        "no resource": sign(secret, raw, resource={}),
        "two resources": sign(secret, raw, resource={"dashboard": dashboard.pk, "insight": 1}),
        "a resource id as text": sign(secret, raw, resource={"dashboard": str(dashboard.pk)}),
        "no locked": jwt.encode({"resource": good["resource"], "exp": hour}, raw, algorithm="HS256", headers=headers),
        "locked properties not filters": sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": ["x"]}),
        "locked dates not dates": sign(
            secret, raw, dashboard_id=dashboard.pk, locked={"properties": [], "date_from": "yesterday"}
        ),
        "viewer_date_range not a boolean": sign(secret, raw, dashboard_id=dashboard.pk, viewer_date_range="yes"),
    }


class TestRefusals:
    @pytest.fixture
    def reference_404(self, db):
        return get("not-a-token"), get("not-a-token", format="json")

    def assert_refused(self, token, reference_404):
        html, as_json = reference_404
        response = get(token)
        assert response.status_code == 404
        assert response.content == html.content
        assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
        response = get(token, format="json")
        assert response.status_code == 404
        assert response.content == as_json.content
        assert response.json() == {"type": "invalid_request", "code": "not_found", "detail": "Not found.", "attr": None}

    def test_every_refused_token_is_the_same_404(self, portal, dashboard, other_project, reference_404):
        secret, raw = portal
        other_dashboard = DashboardFactory(project=other_project)
        for reason, token in refused_tokens(secret, raw, dashboard, other_dashboard).items():
            assert get(token).status_code == 404, reason
            self.assert_refused(token, reference_404)

    def test_a_rotated_secrets_tokens_are_refused_at_once(self, portal, dashboard, alice, reference_404):
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk)
        assert get(token).status_code == 200
        _, new = embed_secret_rotate(actor=alice, secret=secret)
        self.assert_refused(token, reference_404)
        assert get(sign(secret, new, dashboard_id=dashboard.pk)).status_code == 200

    def test_a_deleted_secrets_tokens_are_refused(self, portal, dashboard, alice, reference_404):
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk)
        embed_secret_delete(actor=alice, secret=secret)
        self.assert_refused(token, reference_404)

    def test_a_deleted_dashboard_or_insight_is_refused(self, portal, project, dashboard, reference_404):
        secret, raw = portal
        insight = InsightFactory(project=project, deleted=True)
        self.assert_refused(sign(secret, raw, resource={"insight": insight.pk}), reference_404)
        dashboard.deleted = True
        dashboard.save()
        self.assert_refused(sign(secret, raw, dashboard_id=dashboard.pk), reference_404)

    def test_an_organization_that_allows_no_public_pages_shows_none(
        self, portal, organization, dashboard, reference_404
    ):
        secret, raw = portal
        organization.allow_publicly_shared_resources = False
        organization.save()
        self.assert_refused(sign(secret, raw, dashboard_id=dashboard.pk), reference_404)


class TestRetentionKeepsToTheLockedDates:
    """A retention counts its periods back from the range's end whatever the range's start: on an embed, only the
    periods that start inside the dates in force are computed."""

    def retention_tile(self, dashboard, period: str):
        query = {
            "kind": "RetentionQuery",
            "retentionFilter": {"period": period, "totalIntervals": 8},
        }
        return DashboardTileFactory(dashboard=dashboard, insight__name=f"Retention by {period}", insight__query=query)

    def shown(self, portal, dashboard, name: str, **locked) -> dict:
        secret, raw = portal
        token = sign(secret, raw, dashboard_id=dashboard.pk, locked={"properties": CHROME, **locked})
        tiles = get(token, format="json").json()["tiles"]
        return next(tile["insight"] for tile in tiles if tile["insight"]["name"] == name)

    def test_only_periods_inside_the_locked_range_are_cohorts(self, portal, project, dashboard):
        self.retention_tile(dashboard, "Day")
        shown = self.shown(portal, dashboard, "Retention by Day", date_from="-2d")
        assert shown["error"] is None
        assert len(shown["result"]) == 3  # the day two days ago, yesterday and today
        unlocked = self.shown(portal, dashboard, "Retention by Day")
        assert len(unlocked["result"]) == 8

    def test_a_period_longer_than_the_range_is_not_shown(self, portal, project, dashboard):
        self.retention_tile(dashboard, "Month")
        today = timezone.now().date()
        if today.day <= 3:
            pytest.skip("the month began within the range")
        shown = self.shown(portal, dashboard, "Retention by Month", date_from="-2d")
        assert shown["result"] is None and "periods start before" in shown["error"]


class TestAViewerRangeIsOneQueryPerPeriod:
    """The cache key of a viewer's range is stable within its refresh period (issue 51, part 2): it was resolved at
    the microsecond of each view, so every view computed again."""

    @pytest.fixture
    def computations(self, monkeypatch):
        counted = []
        compute = runner.compute
        monkeypatch.setattr(runner, "compute", lambda parsed, **kwargs: counted.append(1) or compute(parsed, **kwargs))
        return counted

    def test_a_range_inside_the_locked_one_is_kept_relative(self, portal, dashboard, computations):
        secret, raw = portal
        locked = {"properties": CHROME, "date_from": "-30d"}
        token = sign(secret, raw, dashboard_id=dashboard.pk, locked=locked, viewer_date_range=True)

        bodies = [get(token, format="json", date_from="-7d").json() for _ in range(3)]

        assert {(body["date_range"]["date_from"], body["date_range"]["date_to"]) for body in bodies} == {("-7d", None)}
        assert len(computations) == 1 and total(bodies[0]["tiles"][0]) == 3

    def test_a_range_the_locked_one_cuts_is_resolved_at_the_start_of_the_period(
        self, portal, dashboard, computations, monkeypatch, settings
    ):
        settings.SHARED_PAGE_REFRESH_SECONDS = 300
        start = refresh_period_start()
        clock = SimpleNamespace(now=start + dt.timedelta(seconds=10))
        monkeypatch.setattr("dashboards.core.results.timezone", SimpleNamespace(now=lambda: clock.now))
        secret, raw = portal
        locked = {"properties": CHROME, "date_from": "-30d", "date_to": "-12h"}
        token = sign(secret, raw, dashboard_id=dashboard.pk, locked=locked, viewer_date_range=True)

        first = get(token, format="json", date_from="-7d").json()["date_range"]
        clock.now = start + dt.timedelta(seconds=250, microseconds=123_456)
        second = get(token, format="json", date_from="-7d").json()["date_range"]
        clock.now = start + dt.timedelta(seconds=301)
        following = get(token, format="json", date_from="-7d").json()["date_range"]

        assert (first["date_from"], first["date_to"]) == (second["date_from"], second["date_to"])
        assert first["note"] and len(computations) == 2  # one for the first period, one for the next
        assert first["date_to"] != following["date_to"]


def test_the_refresh_period_starts_on_a_multiple_of_the_period(settings):
    settings.SHARED_PAGE_REFRESH_SECONDS = 300
    moment = dt.datetime(2026, 11, 28, 21, 34, 59, 999_999, tzinfo=dt.UTC)

    assert refresh_period_start(moment) == dt.datetime(2026, 11, 28, 21, 30, tzinfo=dt.UTC)
    following = dt.datetime(2026, 11, 28, 21, 35, tzinfo=dt.UTC)
    assert refresh_period_start(moment + dt.timedelta(microseconds=1)) == following


@pytest.mark.parametrize(
    ("properties", "stated"),
    [
        ([], ""),
        (CHROME, "Only: $browser = Chrome"),
        (
            [
                {"key": "$browser", "value": ["Chrome", "Safari"], "operator": "is_not"},
                {"key": "price", "value": 10, "operator": "gte"},
                {"key": "email", "operator": "is_set"},
                {"key": "beta", "value": True},
            ],
            "Only: $browser ≠ Chrome and Safari and price ≥ 10 and email is set and beta = true",
        ),
    ],
)
def test_the_locked_properties_are_stated_as_people_read_them(properties, stated):
    assert locked_statement(properties) == stated
