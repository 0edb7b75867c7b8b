"""A `persons` batch export executed by the test Temporal into a Postgres destination (DECISIONS.md §17 "Models"):
the persons changed in each interval, one row per distinct id, upserted on (team_id, distinct_id)."""

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from pipelines.batch_exports.temporal.inputs import interval_end
from pipelines.events.models import Person
from tests.pipelines.temporal.test_orchestration import create_export, export_url, finished, run_finished

HOUR = dt.timedelta(hours=1)


def capture(project, events: list[dict]) -> None:
    body = {"api_key": project.api_token, "batch": events}
    response = Client().post("/batch/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content


def backfill(client, project, export, start, end):
    from pipelines.batch_exports.models import BatchExportBackfill

    response = client.post(
        f"{export_url(project, export.pk)}backfills/",
        {"start_at": start.isoformat(), "end_at": end.isoformat()},
        format="json",
    )
    assert response.status_code == 201, response.content
    return BatchExportBackfill.objects.get(pk=response.json()["id"])


@pytest.mark.requires_postgres
def test_a_persons_export_to_postgres_writes_the_persons_changed_in_its_interval(
    temporal, scratch_postgres, api_client, project
):
    config, reader = scratch_postgres
    now = timezone.now()
    end = interval_end(now, HOUR)
    capture(
        project,
        [
            {"event": "$pageview", "distinct_id": "anon", "properties": {"$set": {"plan": "free"}}},
            {"event": "$identify", "distinct_id": "ada", "properties": {"$anon_distinct_id": "anon"}},
            {"event": "$pageview", "distinct_id": "bob", "properties": {"$set": {"email": "bob@example.com"}}},
            {"event": "$pageview", "distinct_id": "old", "properties": {"$set": {"stale": True}}},
        ],
    )
    # Two persons changed an hour ago, one two hours ago: each run exports its interval's.
    Person.objects.filter(distinct_id_rows__distinct_id__in=["ada", "bob"]).update(
        updated_at=end - HOUR + dt.timedelta(minutes=5)
    )
    Person.objects.filter(distinct_id_rows__distinct_id="old").update(
        updated_at=end - 2 * HOUR + dt.timedelta(minutes=5)
    )
    ada = Person.objects.get(distinct_id_rows__distinct_id="ada")
    export = create_export(api_client, project, {"type": "Postgres", "config": config}, model="persons")
    table = f'"{config["schema"]}"."{config["table_name"]}"'

    done = finished(backfill(api_client, project, export, end - 2 * HOUR, end))

    assert done.status == "Completed"
    runs = list(done.runs.order_by("data_interval_start"))
    assert [(run.status, run.records_completed, run.records_total_count) for run in runs] == [
        ("Completed", 1, 1),
        ("Completed", 3, 3),
    ]
    rows = reader.execute(
        f"SELECT team_id, distinct_id, person_id, properties, person_version FROM {table} ORDER BY distinct_id"
    ).fetchall()
    assert [(row[0], row[1], row[2], row[3]) for row in rows] == [
        (project.pk, "ada", str(ada.uuid), {"plan": "free"}),
        (project.pk, "anon", str(ada.uuid), {"plan": "free"}),
        (project.pk, "bob", rows[2][2], {"email": "bob@example.com"}),
        (project.pk, "old", rows[3][2], {"stale": True}),
    ]
    columns = [
        row[0]
        for row in reader.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
            "ORDER BY ordinal_position",
            [config["schema"], config["table_name"]],
        )
    ]
    assert columns == [
        "team_id",
        "distinct_id",
        "person_id",
        "properties",
        "person_version",
        "created_at",
        "updated_at",
    ]

    # A person changed again is written over its rows by the retry of its interval, not added.
    Person.objects.filter(pk=ada.pk).update(properties={"plan": "pro"})
    response = api_client.post(f"{export_url(project, export.pk)}runs/{runs[1].pk}/retry/")
    assert response.status_code == 201
    assert run_finished(response.json()["id"]).status == "Completed"
    assert reader.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 4
    assert reader.execute(f"SELECT properties FROM {table} WHERE distinct_id = 'anon'").fetchone()[0] == {"plan": "pro"}
