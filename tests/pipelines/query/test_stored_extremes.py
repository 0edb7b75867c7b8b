"""Events stored at the edges of the calendar read safely (issue 51): a captured year-1 or year-9999 event, in a
project whose time zone moves it out of Python's calendar, is shown (in UTC) rather than a 500, and it does not
poison `"date_from": "all"`, which starts at the project's first event since 2015 as the reference's does."""

import pytest
from django.test import Client

from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.pipelines.query.conftest import add_event, frozen_now, hogql, on_both_engines, trends  # noqa: F401 - a fixture

run = on_both_engines()  # every test on the service's database and on ClickHouse (chDB)

# A zone whose local time of the stored moment falls outside the years 1 to 9999, and that moment as shown.
EDGES = [
    pytest.param("Pacific/Kiritimati", "9999-12-31T23:00:00Z", "9999-12-31T23:00:00+00:00", id="year-10000-locally"),
    pytest.param("America/New_York", "0001-01-01T01:00:00Z", "0001-01-01T01:00:00+00:00", id="year-0-locally"),
]


def in_zone(project, tz: str):
    project.time_zone = tz
    project.save(update_fields=["time_zone"])
    return project


@pytest.mark.parametrize(("tz", "stored", "shown"), EDGES)
def test_a_timestamp_beyond_the_zones_calendar_is_shown_in_utc(run, project, tz, stored, shown):
    in_zone(project, tz)
    add_event(project, stored, distinct_id="edge")
    add_event(project, "2024-03-01T12:00:00Z", distinct_id="plain")

    times = run(hogql("SELECT distinct_id, timestamp FROM events ORDER BY timestamp"))
    bounds = run(hogql("SELECT min(timestamp), max(timestamp) FROM events WHERE distinct_id = 'edge'"))
    star = run(hogql("SELECT * FROM events WHERE distinct_id = 'edge'"))

    plain = "2024-03-02T02:00:00+14:00" if tz == "Pacific/Kiritimati" else "2024-03-01T07:00:00-05:00"
    assert sorted(times["results"]) == [["edge", shown], ["plain", plain]]
    assert bounds["results"] == [[shown, shown]]
    assert star["columns"][-1] == "timestamp" and star["results"][0][-1] == shown


@pytest.mark.parametrize("stored", ["0001-01-01T00:00:00Z", "1000-06-01T00:00:00Z", "2014-12-31T23:59:59Z"])
@pytest.mark.usefixtures("frozen_now")
def test_all_starts_at_the_first_event_since_2015(run, project, stored):
    add_event(project, stored)
    add_event(project, "2024-03-01T12:00:00Z")

    [result] = run(trends(dateRange={"date_from": "all"}))["results"]

    assert result["days"][0] == "2024-03-01" and result["days"][-1] == "2024-03-18"
    assert result["count"] == 1


@pytest.mark.parametrize(("tz", "stored", "shown"), EDGES)
@pytest.mark.usefixtures("frozen_now")
def test_all_is_now_when_the_only_events_lie_beyond_it_or_before_2015(run, project, tz, stored, shown):
    in_zone(project, tz)
    add_event(project, stored)

    [result] = run(trends(dateRange={"date_from": "all"}))["results"]

    assert len(result["days"]) == 1 and result["count"] == 0


@pytest.mark.usefixtures("frozen_now")
def test_an_all_insight_and_its_shared_page_answer_with_a_year_1_event(key_client, project):
    add_event(project, "0001-01-01T00:00:00Z")
    add_event(project, "2024-03-01T12:00:00Z")
    query = {"kind": "InsightVizNode", "source": trends(dateRange={"date_from": "all"})}
    dashboard = DashboardFactory(project=project)
    tile = DashboardTileFactory(dashboard=dashboard, insight__project=project, insight__query=query)
    sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)
    client = key_client("insight:read")

    insight = client.get(f"/api/projects/{project.pk}/insights/{tile.insight_id}/", {"refresh": "force_blocking"})
    page = Client().get(f"/shared/{sharing.access_token}", {"format": "json"})

    assert insight.status_code == 200 and insight.json()["error"] is None
    assert insight.json()["result"][0]["count"] == 1
    [shared] = page.json()["tiles"]
    assert page.status_code == 200 and shared["insight"]["error"] is None
    assert shared["insight"]["result"][0]["count"] == 1
