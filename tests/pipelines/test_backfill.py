import datetime as dt

import pytest
from django.utils import timezone

from pipelines.batch_exports.models import BatchExportBackfill, BatchExportRun
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory


def backfill_url(organization, export) -> str:
    return f"/api/organizations/{organization.id}/batch_exports/{export.pk}/backfill/"


def runs_url(organization, export) -> str:
    return f"/api/organizations/{organization.id}/batch_exports/{export.pk}/runs/"


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


@pytest.fixture
def hourly(project):
    return BatchExportFactory(project=project, interval="hour")


def test_backfill_over_six_hours_creates_six_starting_runs(client, organization, hourly):
    body = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T06:00:00Z"}
    response = client.post(backfill_url(organization, hourly), body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == str(hourly.id)
    runs = response.json()["latest_runs"]
    assert len(runs) == 6
    assert {run["status"] for run in runs} == {"Starting"}
    # Newest first: the latest interval leads.
    assert [run["data_interval_start"] for run in runs] == [
        f"2024-01-01T{hour:02d}:00:00Z" for hour in range(5, -1, -1)
    ]
    assert runs[0]["data_interval_end"] == "2024-01-01T06:00:00Z"
    backfill = BatchExportBackfill.objects.get()
    assert backfill.batch_export_id == hourly.id
    assert backfill.runs.count() == 6


def test_backfill_accepts_other_timezones(client, organization, hourly):
    body = {"start_at": "2024-01-01T02:00:00+02:00", "end_at": "2024-01-01T03:00:00+02:00"}
    response = client.post(backfill_url(organization, hourly), body, format="json")
    assert response.status_code == 200
    assert response.json()["latest_runs"][0]["data_interval_start"] == "2024-01-01T00:00:00Z"


def test_a_partial_last_interval_is_cut_at_the_end(client, organization, project):
    daily = BatchExportFactory(project=project, interval="day")
    body = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-02T12:00:00Z"}
    response = client.post(backfill_url(organization, daily), body, format="json")
    assert response.status_code == 200
    runs = response.json()["latest_runs"]
    assert [(run["data_interval_start"], run["data_interval_end"]) for run in runs] == [
        ("2024-01-02T00:00:00Z", "2024-01-02T12:00:00Z"),
        ("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"),
    ]


@pytest.mark.parametrize(
    "body,attr",
    [
        ({"start_at": "2024-01-01T00:00:00", "end_at": "2024-01-01T06:00:00Z"}, "start_at"),
        ({"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T06:00:00"}, "end_at"),
        ({"start_at": "2024-01-01T06:00:00Z", "end_at": "2024-01-01T00:00:00Z"}, "end_at"),
        ({"start_at": "2024-01-01T06:00:00Z", "end_at": "2024-01-01T06:00:00Z"}, "end_at"),
        ({"start_at": "2024-01-01T00:00:00Z"}, "end_at"),
        ({"start_at": "not a date", "end_at": "2024-01-01T06:00:00Z"}, "start_at"),
        # Well formed but impossible: minute 99.
        ({"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T12:99:00Z"}, "end_at"),
        ({"start_at": 12, "end_at": "2024-01-01T06:00:00Z"}, "start_at"),
    ],
)
def test_a_bad_range_creates_nothing(client, organization, hourly, body, attr):
    response = client.post(backfill_url(organization, hourly), body, format="json")
    assert response.status_code == 400
    assert response.json()["type"] == "validation_error"
    assert response.json()["attr"] == attr
    assert not BatchExportRun.objects.exists()
    assert not BatchExportBackfill.objects.exists()


def test_a_naive_datetime_is_refused_with_a_clear_message(client, organization, hourly):
    body = {"start_at": "2024-01-01T00:00:00", "end_at": "2024-01-01T06:00:00"}
    response = client.post(backfill_url(organization, hourly), body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "naive"
    assert "timezone" in response.json()["detail"]


def test_end_at_most_one_interval_in_the_future(client, organization, hourly):
    now = timezone.now().replace(microsecond=0)
    too_far = {
        "start_at": (now - dt.timedelta(hours=2)).isoformat(),
        "end_at": (now + dt.timedelta(hours=2)).isoformat(),
    }
    response = client.post(backfill_url(organization, hourly), too_far, format="json")
    assert response.status_code == 400
    assert response.json()["attr"] == "end_at"
    assert not BatchExportRun.objects.exists()

    allowed = {
        "start_at": (now - dt.timedelta(hours=2)).isoformat(),
        "end_at": (now + dt.timedelta(minutes=30)).isoformat(),
    }
    response = client.post(backfill_url(organization, hourly), allowed, format="json")
    assert response.status_code == 200
    assert BatchExportRun.objects.count() == 3


def test_a_huge_range_is_refused(client, organization, project):
    every_five = BatchExportFactory(project=project, interval="every 5 minutes")
    body = {"start_at": "2020-01-01T00:00:00Z", "end_at": "2024-01-01T00:00:00Z"}
    response = client.post(backfill_url(organization, every_five), body, format="json")
    assert response.status_code == 400
    assert not BatchExportRun.objects.exists()


def test_latest_runs_shows_ten_and_runs_lists_all_newest_first(client, organization, hourly):
    body = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-02T00:00:00Z"}
    response = client.post(backfill_url(organization, hourly), body, format="json")
    assert response.status_code == 200
    assert len(response.json()["latest_runs"]) == 10
    assert response.json()["latest_runs"][0]["data_interval_start"] == "2024-01-01T23:00:00Z"

    page = client.get(runs_url(organization, hourly), {"limit": 5, "offset": 5})
    assert page.status_code == 200
    assert page.json()["count"] == 24
    assert page.json()["next"] is not None
    assert [run["data_interval_start"] for run in page.json()["results"]] == [
        f"2024-01-01T{hour:02d}:00:00Z" for hour in range(18, 13, -1)
    ]
    assert all(run["batch_export"] == str(hourly.id) for run in page.json()["results"])


def test_runs_lists_only_this_exports_runs(key_client, organization, project, hourly):
    BatchExportRunFactory(batch_export=BatchExportFactory(project=project))
    mine = BatchExportRunFactory(batch_export=hourly)
    response = key_client("batch_export:read").get(runs_url(organization, hourly))
    assert response.status_code == 200
    assert [run["id"] for run in response.json()["results"]] == [str(mine.id)]


def test_backfill_of_another_organizations_export_is_not_found(client, organization, other_project):
    theirs = BatchExportFactory(project=other_project)
    body = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T06:00:00Z"}
    response = client.post(backfill_url(organization, theirs), body, format="json")
    assert response.status_code == 404
    assert not BatchExportRun.objects.exists()


def test_a_list_page_shows_each_export_as_its_own_route_does(client, organization, project, hourly):
    """The list reads exports and their latest runs in bulk (plain values, one query for every export's runs);
    each item must still be exactly the export's own representation, ties in `created_at` (a backfill's runs)
    broken the same way, and an export without runs included."""
    other = BatchExportFactory(project=project, interval="day", paused=True)
    BatchExportFactory(project=project, interval="hour")
    body = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-02T00:00:00Z"}
    assert client.post(backfill_url(organization, hourly), body, format="json").status_code == 200
    BatchExportRunFactory.create_batch(3, batch_export=other)
    for url in (f"/api/organizations/{organization.id}/batch_exports/", f"/api/projects/{project.id}/batch_exports/"):
        page = client.get(url)
        assert page.status_code == 200
        results = page.json()["results"]
        assert len(results) == 3
        assert sorted(len(item["latest_runs"]) for item in results) == [0, 3, 10]
        for item in results:
            assert item == client.get(f"{url}{item['id']}/").json()
