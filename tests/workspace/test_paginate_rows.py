"""LimitOffsetPagination.paginate_rows: the page and its count in one query give what paginate_queryset gives
(the same rows in the same order, count, links and errors), past the end of the list and under filters too."""

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from tests.dashboards.factories import DashboardFactory


def dashboards_url(project) -> str:
    return f"/api/projects/{project.id}/dashboards/"


@pytest.fixture
def five(project, alice):
    names = ["e", "b", "d", "a", "c"]
    return [DashboardFactory(project=project, name=name, pinned=name == "d") for name in names]


@pytest.mark.parametrize(
    "params,count,names,has_next,has_previous",
    [
        ({}, 5, ["d", "a", "b", "c", "e"], False, False),
        ({"limit": 2}, 5, ["d", "a"], True, False),
        ({"limit": 2, "offset": 2}, 5, ["b", "c"], True, True),
        ({"limit": 2, "offset": 4}, 5, ["e"], False, True),
        ({"limit": 2, "offset": 5}, 5, [], False, True),
        ({"limit": 2, "offset": 50}, 5, [], False, True),
        ({"search": "zzz"}, 0, [], False, False),
        ({"search": "zzz", "offset": 3}, 0, [], False, True),
        ({"pinned": "false", "limit": 3, "offset": 1}, 4, ["b", "c", "e"], False, True),
    ],
)
def test_pages_count_and_links(key_client, project, five, params, count, names, has_next, has_previous):
    body = key_client("dashboard:read").get(dashboards_url(project), params).json()

    assert body["count"] == count
    assert [row["name"] for row in body["results"]] == names
    assert (body["next"] is not None) == has_next
    assert (body["previous"] is not None) == has_previous


def test_a_page_past_the_end_counts_in_a_query_of_its_own(key_client, project, five):
    client = key_client("dashboard:read")
    client.get(dashboards_url(project))  # the key's first use records it
    with CaptureQueriesContext(connection) as within:
        client.get(dashboards_url(project), {"offset": 1})
    with CaptureQueriesContext(connection) as past:
        client.get(dashboards_url(project), {"offset": 10})

    assert len(past.captured_queries) == len(within.captured_queries) + 1
    assert "COUNT(*)" in past.captured_queries[-1]["sql"].upper()


@pytest.mark.parametrize("params", [{"limit": "-1"}, {"offset": "x"}])
def test_bad_parameters_are_a_400(key_client, project, five, params):
    response = key_client("dashboard:read").get(dashboards_url(project), params)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"


def test_other_projects_rows_are_neither_shown_nor_counted(key_client, project, other_project, five):
    DashboardFactory.create_batch(3, project=other_project)
    DashboardFactory(project=project, deleted=True)

    body = key_client("dashboard:read").get(dashboards_url(project), {"limit": 10}).json()

    assert body["count"] == 5
    assert {row["id"] for row in body["results"]} == {dashboard.id for dashboard in five}


@pytest.fixture
def compiles(monkeypatch):
    """The shapes compiled from now on (workspace.api.rows._compile), on a connection that keeps none yet."""
    from workspace.api import rows

    connections["default"].__dict__.pop("compiled_queries", None)
    compiled = []
    real = rows._compile

    def spy(build, using, kinds, *rest):
        compiled.append([name for name, _ in kinds])
        return real(build, using, kinds, *rest)

    monkeypatch.setattr(rows, "_compile", spy)
    return compiled


def test_a_list_is_compiled_once_per_query_string_and_run_for_every_page_and_tenant(
    key_client, project, other_project, charlie, five, compiles
):
    DashboardFactory(project=other_project, name="theirs")
    alice_client, charlie_client = key_client("dashboard:read"), key_client("dashboard:read", user=charlie)

    pages = [
        [row["name"] for row in alice_client.get(dashboards_url(project), params).json()["results"]]
        for params in ({"limit": 2}, {"limit": 2, "offset": 2}, {"limit": 3, "offset": 1}, {"offset": 4})
    ]
    theirs = charlie_client.get(dashboards_url(other_project)).json()

    assert pages == [["d", "a"], ["b", "c"], ["a", "b", "c"], ["e"]]
    assert [row["name"] for row in theirs["results"]] == ["theirs"] and theirs["count"] == 1
    assert compiles == [["limit", "offset", "project", "user"]]  # one shape: the same SQL for every page and tenant

    pinned = alice_client.get(dashboards_url(project), {"pinned": "true", "limit": 5}).json()
    unpinned = alice_client.get(dashboards_url(project), {"pinned": "false", "limit": 5}).json()

    assert [row["name"] for row in pinned["results"]] == ["d"]
    assert [row["name"] for row in unpinned["results"]] == ["a", "b", "c", "e"]
    assert len(compiles) == 3  # a filter's value shapes the SQL: each query string is a shape of its own


def test_a_compiled_list_with_an_invalid_filter_is_a_400_every_time(key_client, project, five, compiles):
    client = key_client("dashboard:read")

    responses = [client.get(dashboards_url(project), {"pinned": "maybe"}) for _ in range(2)]

    assert [response.status_code for response in responses] == [400, 400]
    assert responses[1].json()["attr"] == "pinned"
    assert compiles == [["limit", "offset", "project", "user"]] * 2  # refused while building: nothing kept


@pytest.mark.requires_postgres
def test_a_page_is_planned_once_per_limit_and_offset(key_client, project, five):
    """Its limit and offset are written into the statement, whose plan the database keeps and runs again (a generic
    plan): a plan for any limit would read and sort the whole list, so the database would plan it on every run."""
    client = key_client("dashboard:read")

    for params in [{"limit": 2}] * 8 + [{"limit": 2, "offset": 2}]:
        assert client.get(dashboards_url(project), params).status_code == 200

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%dashboards_dashboard%%' AND statement LIKE '%%OFFSET%%'"
        )
        pages = dict(cursor.fetchall())
    [first] = [plans for statement, plans in pages.items() if "LIMIT 2 OFFSET 0)" in statement]
    [second] = [statement for statement in pages if "LIMIT 2 OFFSET 2)" in statement]
    assert first >= 1
    assert "$" in second  # the project and the caller are still parameters
