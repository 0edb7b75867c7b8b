"""Insights carry their results (DECISIONS.md §15): retrieve computes as `?refresh=` says, lists and writes show the
cached result and never compute, dashboards show their tiles' cached results and compute stale ones on request, a
query that cannot be computed is an `error` rather than a failure, and results are neither activity nor what
If-Match compares."""

import json

import pytest

from dashboards.core.models import Insight
from dashboards.core.results import RESULT_FIELDS
from dashboards.core.template_library import bundled_templates
from dashboards.demo import create_demo_data
from pipelines.query import runner
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from tests.pipelines.query.conftest import NOW, add_event, frozen_now, hogql, trends  # noqa: F401 - a fixture
from workspace.api import throttling
from workspace.models import ActivityLog

PAGEVIEWS = trends(dateRange={"date_from": "-3d"})
SIGNUPS = trends({"kind": "EventsNode", "event": "signed_up"}, dateRange={"date_from": "-3d"})
PATHS = {"kind": "InsightVizNode", "source": {"kind": "PathsQuery", "pathsFilter": {}}}  # a kind not computed


def viz(source: dict) -> dict:
    return {"kind": "InsightVizNode", "source": source}


def insight_url(project, insight=None) -> str:
    base = f"/api/projects/{project.pk}/insights/"
    return base if insight is None else f"{base}{insight.pk}/"


def dashboard_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"


@pytest.fixture
def events(project, frozen_now):  # noqa: F811 - the fixture imported above
    """Page views over the last days (two today), and one sign-up yesterday."""
    for when in ("2024-03-16T10:00:00Z", "2024-03-17T10:00:00Z", "2024-03-18T09:00:00Z", "2024-03-18T10:00:00Z"):
        add_event(project, when)
    add_event(project, "2024-03-17T12:00:00Z", event="signed_up")


@pytest.fixture
def client(key_client):
    return key_client("insight:read", "insight:write", "dashboard:read", "dashboard:write")


@pytest.fixture
def no_computation(monkeypatch):
    """Any computation fails the test: what is shown must come from the cache."""

    def refuse(*args, **kwargs):
        raise AssertionError("a result was computed")

    monkeypatch.setattr(runner, "compute", refuse)


class TestQuery:
    """`GET …/insights/:id/query/`: the insight's saved query run, as the reference's `insight-query` tool does."""

    def test_it_answers_the_query_and_its_result_as_the_insight_read_computes_it(self, client, project, events):
        insight = InsightFactory(project=project, query=PAGEVIEWS, name="Views")

        response = client.get(f"{insight_url(project, insight)}query/")

        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"id", "short_id", "name", "query", *RESULT_FIELDS}
        assert (body["id"], body["short_id"], body["name"], body["query"]) == (
            insight.pk,
            insight.short_id,
            "Views",
            PAGEVIEWS,
        )
        assert body["result"][0]["data"] == [0, 1, 1, 2] and body["is_cached"] is False
        assert response["ETag"]
        again = client.get(f"{insight_url(project, insight)}query/", HTTP_IF_NONE_MATCH=response["ETag"])
        assert again.status_code == 304

    def test_refresh_is_honoured(self, client, project, events, monkeypatch):
        insight = InsightFactory(project=project, query=PAGEVIEWS)
        client.get(f"{insight_url(project, insight)}query/")
        add_event(project, "2024-03-18T11:00:00Z")

        cached = client.get(f"{insight_url(project, insight)}query/").json()
        computed = client.get(f"{insight_url(project, insight)}query/", {"refresh": "force_blocking"}).json()

        assert (cached["is_cached"], cached["result"][0]["data"][-1]) == (True, 2)
        assert (computed["is_cached"], computed["result"][0]["data"][-1]) == (False, 3)

    def test_a_deleted_or_foreign_insight_is_a_404(self, client, project, other_project):
        deleted = InsightFactory(project=project, query=PAGEVIEWS, deleted=True)
        foreign = InsightFactory(project=other_project, query=PAGEVIEWS)

        assert client.get(f"{insight_url(project, deleted)}query/").status_code == 404
        assert client.get(f"/api/projects/{project.pk}/insights/{foreign.pk}/query/").status_code == 404


class TestRetrieve:
    @pytest.mark.parametrize("query", [PAGEVIEWS, viz(PAGEVIEWS)], ids=["bare", "InsightVizNode"])
    def test_retrieve_computes_the_result_of_a_bare_or_wrapped_query(self, client, project, events, query):
        insight = InsightFactory(project=project, query=query)

        body = client.get(insight_url(project, insight)).json()

        [series] = body["result"]
        assert (series["label"], series["days"]) == ("$pageview", ["2024-03-15", "2024-03-16", "2024-03-17", NOW_DAY])
        assert series["data"] == [0, 1, 1, 2] and series["count"] == 4
        assert body["query"] == query  # stored as sent
        assert (body["is_cached"], body["last_refresh"], body["timezone"], body["error"]) == (
            False,
            NOW.isoformat(),
            "UTC",
            None,
        )
        assert body["next_allowed_client_refresh"] > body["last_refresh"]

    def test_blocking_answers_from_the_cache_while_fresh(self, client, project, events):
        insight = InsightFactory(project=project, query=PAGEVIEWS)
        first = client.get(insight_url(project, insight)).json()
        add_event(project, "2024-03-18T11:00:00Z")

        second = client.get(insight_url(project, insight), {"refresh": "blocking"}).json()

        assert second["is_cached"] is True
        assert (second["result"], second["last_refresh"]) == (first["result"], first["last_refresh"])

    def test_force_blocking_computes_again(self, client, project, events):
        insight = InsightFactory(project=project, query=PAGEVIEWS)
        client.get(insight_url(project, insight))
        add_event(project, "2024-03-18T11:00:00Z")

        body = client.get(insight_url(project, insight), {"refresh": "force_blocking"}).json()

        assert body["is_cached"] is False
        assert body["result"][0]["data"][-1] == 3

    def test_force_cache_never_computes(self, client, project, events, monkeypatch):
        insight = InsightFactory(project=project, query=PAGEVIEWS)
        cached = client.get(insight_url(project, insight)).json()
        other = InsightFactory(project=project, query=SIGNUPS)
        monkeypatch.setattr(runner, "compute", None)  # a computation would fail with a TypeError

        hit = client.get(insight_url(project, insight), {"refresh": "force_cache"}).json()
        miss = client.get(insight_url(project, other), {"refresh": "force_cache"}).json()

        assert (hit["result"], hit["is_cached"]) == (cached["result"], True)
        assert (miss["result"], miss["is_cached"], miss["last_refresh"], miss["error"]) == (None, False, None, None)

    def test_the_legacy_true_computes_again_and_false_is_the_default(self, client, project, events):
        insight = InsightFactory(project=project, query=PAGEVIEWS)
        client.get(insight_url(project, insight))
        add_event(project, "2024-03-18T11:00:00Z")

        cached = client.get(insight_url(project, insight), {"refresh": "false"}).json()
        computed = client.get(insight_url(project, insight), {"refresh": "true"}).json()

        assert (cached["is_cached"], cached["result"][0]["data"][-1]) == (True, 2)
        assert (computed["is_cached"], computed["result"][0]["data"][-1]) == (False, 3)

    @pytest.mark.parametrize("refresh", ["yes", "async", "BLOCKING", "True", "force_cache,blocking"])
    def test_an_unknown_refresh_is_a_400_naming_it(self, client, project, refresh):
        insight = InsightFactory(project=project, query=PAGEVIEWS)

        response = client.get(insight_url(project, insight), {"refresh": refresh})

        assert response.status_code == 400
        assert (response.json()["type"], response.json()["attr"]) == ("validation_error", "refresh")

    def test_a_hogql_query_carries_its_columns(self, client, project, events):
        query = {"kind": "DataVisualizationNode", "source": hogql("SELECT event, count() FROM events GROUP BY event")}
        insight = InsightFactory(project=project, query=query)

        body = client.get(insight_url(project, insight)).json()

        assert body["columns"] == ["event", "count()"]
        assert sorted(body["result"]) == [["$pageview", 4], ["signed_up", 1]]
        assert body["hasMore"] is False and len(body["types"]) == 2

    @pytest.mark.parametrize(
        ("query", "error"),
        [
            (PATHS, "query__source__kind: InsightVizNode takes a source of kind TrendsQuery or FunnelsQuery or "),
            ({"kind": "PathsQuery", "series": []}, "query__kind: Unknown query kind 'PathsQuery'"),
            ({"kind": "FunnelsQuery", "series": [{"event": "a"}]}, "query__series: List should have at least 2"),
            (trends(math="nonsense"), "query__math: Unknown field 'math'."),
            ({"kind": "TrendsQuery", "series": [{"event": "x", "math": "avg"}]}, "query__series__0__math_property"),
            ({"no": "kind"}, "query__kind: Unknown query kind None"),
        ],
    )
    def test_a_query_that_cannot_be_computed_gives_a_null_result_and_an_error(self, client, project, query, error):
        insight = InsightFactory(project=project, query=query)

        response = client.get(insight_url(project, insight))

        assert response.status_code == 200
        assert response.json()["result"] is None and response.json()["is_cached"] is False
        assert response.json()["error"].startswith(error)

    def test_an_insight_without_a_query_has_no_result_and_no_error(self, client, project):
        insight = InsightFactory(project=project, query=None)

        body = client.get(insight_url(project, insight)).json()

        assert (body["result"], body["error"], body["timezone"]) == (None, None, "UTC")

    def test_computations_are_throttled_per_key(self, client, project, monkeypatch):
        monkeypatch.setattr(throttling.QueryRateThrottle, "THROTTLE_RATES", {"query": "1/minute"})
        first, second = InsightFactory.create_batch(2, project=project, query=PAGEVIEWS)
        third = InsightFactory(project=project, query=SIGNUPS)

        assert client.get(insight_url(project, first)).status_code == 200
        assert client.get(insight_url(project, second)).status_code == 200  # the same query: a cache hit
        assert client.get(insight_url(project, third)).status_code == 429


class TestListsAndWritesNeverCompute:
    def test_the_list_shows_cached_results_or_null(self, client, project, events, no_computation):
        computed = InsightFactory(project=project, query=PAGEVIEWS)
        InsightFactory(project=project, query=SIGNUPS)
        InsightFactory(project=project, query=PATHS)
        runner.cache.set(
            runner.cache_key(project, runner.parse_query(PAGEVIEWS)),
            {"computed_at": NOW, "response": {"results": [{"label": "cached"}], "last_refresh": NOW.isoformat()}},
        )

        items = {item["id"]: item for item in client.get(insight_url(project)).json()["results"]}

        assert len(items) == 3
        assert items[computed.pk]["result"] == [{"label": "cached"}] and items[computed.pk]["is_cached"] is True
        others = [item for item in items.values() if item["id"] != computed.pk]
        assert [item["result"] for item in others] == [None, None]
        assert sorted(bool(item["error"]) for item in others) == [False, True]  # the funnel says why

    @pytest.mark.parametrize("count", [1, 20])
    def test_the_list_reads_the_cache_once_per_page_in_constant_queries(
        self, client, project, count, no_computation, monkeypatch, django_assert_num_queries
    ):
        for index in range(count):
            InsightFactory(project=project, query=trends(dateRange={"date_from": f"-{index + 1}d"}))
        client.get(insight_url(project))  # the key's first use is recorded
        reads, get_many = [], runner.cache.get_many
        monkeypatch.setattr(runner.cache, "get_many", lambda keys, **kw: reads.append(keys) or get_many(keys, **kw))
        monkeypatch.setattr(
            "dashboards.core.results.query_result", lambda **kwargs: pytest.fail("a query read per insight")
        )

        # key, project, count, page (+users), tags, dashboards
        with django_assert_num_queries(6):
            response = client.get(insight_url(project))

        assert response.status_code == 200 and len(response.json()["results"]) == count
        [results_read] = [keys for keys in reads if any(key.startswith("query:") for key in keys)]
        assert len(results_read) == count

    def test_a_write_answers_with_the_cached_result(self, client, project, events, no_computation):
        insight = InsightFactory(project=project, query=PAGEVIEWS)

        response = client.patch(insight_url(project, insight), {"name": "Renamed"}, format="json")

        assert response.status_code == 200
        assert (response.json()["name"], response.json()["result"]) == ("Renamed", None)


class TestResultsAreNotContent:
    def test_a_computed_result_changes_neither_the_if_match_nor_the_activity(self, client, project, events):
        insight = InsightFactory(project=project, query=PAGEVIEWS)
        before = client.get(insight_url(project, insight), {"refresh": "force_cache"})
        computed = client.get(insight_url(project, insight))
        assert before.json()["result"] is None and computed.json()["result"] is not None

        # The result changed between the two reads, and with it the read's tag (DECISIONS.md §21); the insight did
        # not: If-Match with either tag holds, nothing is recorded.
        response = client.patch(
            insight_url(project, insight),
            {"name": insight.name},
            format="json",
            HTTP_IF_MATCH=before["ETag"],
        )
        again = client.patch(
            insight_url(project, insight), {"name": insight.name}, format="json", HTTP_IF_MATCH=computed["ETag"]
        )

        assert response.status_code == again.status_code == 200
        assert before["ETag"] != computed["ETag"] == response["ETag"] == again["ETag"]
        assert computed["ETag"].startswith(before["ETag"][:-1] + "-")
        assert response.json()["result"] == computed.json()["result"]
        assert not ActivityLog.objects.exists()

    def test_a_dashboard_patch_after_a_result_changed_records_nothing(self, client, project, alice, events):
        dashboard = DashboardFactory(project=project, created_by=alice)
        DashboardTileFactory(dashboard=dashboard, insight__project=project, insight__query=PAGEVIEWS)
        before = client.get(dashboard_url(project, dashboard))
        computed = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"})

        response = client.patch(
            dashboard_url(project, dashboard), {"name": dashboard.name}, format="json", HTTP_IF_MATCH=before["ETag"]
        )

        assert computed.json()["tiles"][0]["insight"]["result"] is not None
        # The read's tag changed with the tile's result (DECISIONS.md §21), the dashboard's part of it did not.
        assert response.status_code == 200
        assert before["ETag"] != computed["ETag"] == response["ETag"]
        assert computed["ETag"].startswith(before["ETag"][:-1] + "-")
        assert not ActivityLog.objects.exists()

    def test_a_real_change_is_recorded_without_results(self, client, project, events):
        insight = InsightFactory(project=project, query=PAGEVIEWS)
        client.get(insight_url(project, insight))

        client.patch(insight_url(project, insight), {"description": "Changed"}, format="json")

        [entry] = ActivityLog.objects.filter(scope="Insight")
        assert entry.detail["after"] == {"description": "Changed"}


class TestDashboardTiles:
    @pytest.fixture
    def dashboard(self, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)
        for order, query in enumerate((PAGEVIEWS, PATHS, SIGNUPS)):
            DashboardTileFactory(dashboard=dashboard, order=order, insight__project=project, insight__query=query)
        DashboardTileFactory(dashboard=dashboard, order=3, text_tile=True)
        return dashboard

    def test_tiles_show_cached_results_and_never_compute_by_default(self, client, project, dashboard, events, request):
        client.get(insight_url(project, dashboard.tiles.get(order=0).insight))  # caches the page views
        request.getfixturevalue("no_computation")

        tiles = client.get(dashboard_url(project, dashboard)).json()["tiles"]

        pageviews, funnel, signups, text = (tile["insight"] for tile in tiles)
        assert pageviews["result"][0]["count"] == 4 and pageviews["is_cached"] is True
        assert signups["result"] is None and signups["error"] is None
        assert funnel["result"] is None and "TrendsQuery" in funnel["error"]
        assert text is None

    def test_refresh_computes_the_stale_tiles_and_a_failing_tile_does_not_fail_the_dashboard(
        self, client, project, dashboard, events
    ):
        response = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"})

        assert response.status_code == 200
        pageviews, funnel, signups, _ = (tile["insight"] for tile in response.json()["tiles"])
        assert pageviews["result"][0]["data"] == [0, 1, 1, 2]
        assert signups["result"][0]["data"] == [0, 0, 1, 0]
        assert (funnel["result"], funnel["error"]) == (None, PATHS_ERROR)

    def test_the_tiles_results_together_are_bounded(self, client, project, dashboard, events, settings):
        """Each result is within QUERY_MAX_RESULT_BYTES; all of one response's within DASHBOARD_MAX_RESULT_BYTES:
        a tile that would pass it says so, the others are shown."""
        whole = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"}).json()["tiles"]
        first = len(json.dumps(whole[0]["insight"]["result"], separators=(",", ":")).encode())
        settings.DASHBOARD_MAX_RESULT_BYTES = first + 10  # room for the first tile's result only

        response = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"})

        assert response.status_code == 200
        pageviews, funnel, signups, _ = (tile["insight"] for tile in response.json()["tiles"])
        assert pageviews["result"] == whole[0]["insight"]["result"]
        assert funnel["error"] == PATHS_ERROR
        assert signups["result"] is None
        assert signups["error"].startswith("result_too_large: ") and "DASHBOARD_MAX_RESULT_BYTES" in signups["error"]
        alone = client.get(insight_url(project, dashboard.tiles.get(order=2).insight)).json()
        assert alone["result"] == whole[2]["insight"]["result"]  # read alone, it is shown

    def test_a_timeout_is_that_tiles_error(self, client, project, dashboard, events, monkeypatch):
        from pipelines.query.errors import QueryTimeout

        def slow(parsed, **kwargs):
            if parsed.node.series[0].event == "signed_up":
                raise QueryTimeout("The query took longer than 10000 ms and was stopped.")
            return original(parsed, **kwargs)

        original = runner.compute
        monkeypatch.setattr(runner, "compute", slow)

        response = client.get(dashboard_url(project, dashboard), {"refresh": "force_blocking"})

        assert response.status_code == 200
        pageviews, _, signups, _ = (tile["insight"] for tile in response.json()["tiles"])
        assert pageviews["result"] is not None
        assert signups["result"] is None and "longer than" in signups["error"]

    def test_a_throttled_computation_is_that_tiles_error(self, client, project, dashboard, events, monkeypatch):
        client.get(insight_url(project, dashboard.tiles.get(order=0).insight))  # caches the page views
        monkeypatch.setattr(throttling.QueryRateThrottle, "THROTTLE_RATES", {"query": "0/minute"})

        response = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"})

        assert response.status_code == 200
        pageviews, _, signups, _ = (tile["insight"] for tile in response.json()["tiles"])
        assert pageviews["result"] is not None
        assert signups["result"] is None and signups["error"]

    def test_an_unknown_refresh_is_a_400(self, client, project, dashboard):
        response = client.get(dashboard_url(project, dashboard), {"refresh": "yes"})

        assert (response.status_code, response.json()["attr"]) == (400, "refresh")


class TestStoredQueries:
    def test_bundled_templates_store_insight_viz_nodes(self, client, project):
        for slug, template in bundled_templates().items():
            for tile in template["tiles"]:
                if tile["type"] == "INSIGHT":
                    assert tile["query"]["kind"] == "InsightVizNode", (slug, tile["name"])
                    assert tile["query"]["source"]["kind"] in ("TrendsQuery", "FunnelsQuery", "RetentionQuery")

        response = client.post(
            f"/api/projects/{project.pk}/dashboards/", {"use_template": "website-traffic"}, format="json"
        )

        assert response.status_code == 201
        stored = Insight.objects.filter(project=project)
        assert stored.count() == 3 and {insight.query["kind"] for insight in stored} == {"InsightVizNode"}

    def test_the_demo_stores_insight_viz_nodes(self, alice, organization, project):
        create_demo_data(user=alice, organization=organization, project=project)

        stored = Insight.objects.filter(project=project)
        assert stored.exists() and {insight.query["kind"] for insight in stored} == {"InsightVizNode"}

    def test_the_bundled_trends_compute(self, client, project, events):
        dashboard_id = client.post(
            f"/api/projects/{project.pk}/dashboards/", {"use_template": "website-traffic"}, format="json"
        ).json()["id"]

        tiles = client.get(f"/api/projects/{project.pk}/dashboards/{dashboard_id}/", {"refresh": "blocking"}).json()

        assert [tile["insight"]["error"] for tile in tiles["tiles"]] == [None, None, None]

    def test_a_bare_query_from_a_document_is_stored_wrapped(self, client, project):
        """DECISIONS.md §15: a template document's bare query is stored in the reference's shape."""
        template = {
            "template_name": "Bare",
            "dashboard_description": "",
            "dashboard_filters": {},
            "tiles": [{"type": "INSIGHT", "name": "Views", "query": PAGEVIEWS}],
        }

        response = client.post(
            f"/api/projects/{project.pk}/dashboards/create_from_template_json/", {"template": template}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["tiles"][0]["insight"]["query"] == {"kind": "InsightVizNode", "source": PAGEVIEWS}


NOW_DAY = NOW.date().isoformat()
PATHS_ERROR = (
    "query__source__kind: InsightVizNode takes a source of kind TrendsQuery or FunnelsQuery or RetentionQuery."
)
