"""The log lines of all of an export's runs (`…/batch_exports/:id/logs/`), on the project and organization routes."""

import datetime as dt

import pytest

from tests.organizations.factories import ProjectFactory
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory, BatchExportRunLogFactory

START = dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)


def iso(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


@pytest.fixture
def export(project):
    return BatchExportFactory(project=project)


@pytest.fixture(params=["project", "organization"])
def logs_url(request, project, export):
    def url(batch_export=export):
        if request.param == "project":
            return f"/api/projects/{project.pk}/batch_exports/{batch_export.pk}/logs/"
        return f"/api/organizations/{project.organization_id}/batch_exports/{batch_export.pk}/logs/"

    return url


@pytest.fixture
def lines(export):
    """Two runs' lines a minute apart, oldest first: INFO, WARNING, ERROR on the first run, INFO on the second."""
    first, second = BatchExportRunFactory(batch_export=export), BatchExportRunFactory(batch_export=export)
    made = []
    for minute, (run, level, message) in enumerate(
        [
            (first, "INFO", "Run started"),
            (first, "WARNING", "Slow destination: retrying the upload"),
            (first, "ERROR", "Upload failed: access denied"),
            (second, "INFO", "Run started again"),
        ]
    ):
        made.append(
            BatchExportRunLogFactory(
                run=run, level=level, message=message, timestamp=START + dt.timedelta(minutes=minute)
            )
        )
    return made


@pytest.fixture
def client(key_client):
    return key_client("batch_export:read")


def messages(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [line["message"] for line in response.json()["results"]]


def test_lines_of_every_run_newest_first_in_the_reference_shape(client, logs_url, export, lines):
    BatchExportRunLogFactory(run=BatchExportRunFactory(batch_export=BatchExportFactory(project=export.project)))
    body = client.get(logs_url()).json()
    assert body["count"] == 4
    assert body["results"][0] == {
        "log_source_id": str(export.pk),
        "instance_id": str(lines[3].run_id),
        "timestamp": iso(lines[3].timestamp),
        "level": "INFO",
        "message": "Run started again",
    }
    assert [line["message"] for line in body["results"]] == [line.message for line in reversed(lines)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"level": "ERROR"}, ["Upload failed: access denied"]),
        ({"level": ["ERROR", "WARNING"]}, ["Upload failed: access denied", "Slow destination: retrying the upload"]),
        ({"search": "UPLOAD"}, ["Upload failed: access denied", "Slow destination: retrying the upload"]),
        ({"after": "2024-05-01T12:01:00Z"}, ["Run started again", "Upload failed: access denied"]),
        ({"before": "2024-05-01T14:01:00+02:00"}, ["Run started"]),
        (
            {"after": "2024-05-01T12:00:00Z", "before": "2024-05-01T12:02:00Z"},
            ["Slow destination: retrying the upload"],
        ),
    ],
)
def test_filters(client, logs_url, lines, query, expected):
    assert messages(client.get(logs_url(), query)) == expected


def test_run_filter(client, logs_url, lines):
    assert messages(client.get(logs_url(), {"run_id": str(lines[3].run_id)})) == ["Run started again"]
    another_export_run = BatchExportRunFactory(
        batch_export=BatchExportFactory(project=lines[0].run.batch_export.project)
    )
    assert messages(client.get(logs_url(), {"run_id": str(another_export_run.pk)})) == []


@pytest.mark.parametrize(
    ("query", "attr"),
    [
        ({"level": "LOUD"}, "level"),
        ({"after": "yesterday"}, "after"),
        ({"before": "2024-13-01T00:00:00Z"}, "before"),
        ({"run_id": "not-a-uuid"}, "run_id"),
    ],
)
def test_bad_filters_are_a_400_naming_the_parameter(client, logs_url, lines, query, attr):
    response = client.get(logs_url(), query)
    assert response.status_code == 400
    assert response.json()["attr"] == attr


def test_another_tenants_export_is_a_404(client, logs_url):
    elsewhere = BatchExportFactory(project=ProjectFactory())
    BatchExportRunLogFactory(run=BatchExportRunFactory(batch_export=elsewhere))
    assert client.get(logs_url(elsewhere)).status_code == 404


def test_the_read_scope_is_needed(key_client, logs_url, lines):
    assert key_client("plugin:read").get(logs_url()).status_code == 403


@pytest.mark.parametrize("rows", [1, 30])
def test_the_list_is_flat(client, logs_url, export, rows, django_assert_num_queries):
    for _ in range(rows):
        BatchExportRunLogFactory(run=BatchExportRunFactory(batch_export=export))
    client.get(logs_url())  # the key's first use writes last_used_at
    # key (+user), the project or organization (+the caller's level), the export (+its latest runs), COUNT, page
    with django_assert_num_queries(6):
        response = client.get(logs_url())
    assert response.json()["count"] == rows


def test_an_empty_level_means_no_filter(client, logs_url, lines):
    assert len(messages(client.get(logs_url() + "?level="))) == 4
