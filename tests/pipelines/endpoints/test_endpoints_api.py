"""/api/projects/:id/endpoints/ (DECISIONS.md §21): publishing, changing (each change of query or parameters is the
next version, earlier ones kept as they were), refusals naming their path, scopes and levels, tenancy, the activity
log and a flat query count."""

import pytest

from pipelines.endpoints.models import Endpoint, EndpointVersion
from pipelines.endpoints.services import endpoint_create
from pipelines.endpoints.views import endpoint_name_allowed
from tests.pipelines.endpoints.conftest import COUNTRY_PARAMETERS, COUNTRY_QUERY, endpoints_url
from workspace.models import ActivityLog

COUNT = {"kind": "HogQLQuery", "query": "SELECT count() FROM events"}


def expected(endpoint: dict, alice) -> dict:
    return {
        "id": endpoint["id"],
        "name": "by-country",
        "description": "Events by country",
        "query": COUNTRY_QUERY,
        "parameters": COUNTRY_PARAMETERS,
        "cache_seconds": 300,
        "version": 1,
        "created_at": endpoint["created_at"],
        "created_by": {
            "id": alice.pk,
            "uuid": str(alice.uuid),
            "distinct_id": alice.distinct_id,
            "first_name": alice.first_name,
            "last_name": alice.last_name,
            "email": alice.email,
            "is_email_verified": alice.is_email_verified,
            "hedgehog_config": alice.hedgehog_config,
        },
        "updated_at": endpoint["updated_at"],
    }


def test_publish_answers_the_whole_endpoint(publish, reader, project, alice):
    created = publish(description="Events by country")

    response = reader.get(endpoints_url(project.pk, "by-country"))

    assert response.status_code == 200
    assert response.json() == created
    assert created == expected(created, alice)
    assert EndpointVersion.objects.get().query == COUNTRY_QUERY


def test_parameters_default_to_none(publish, project):
    created = publish(name="count", query=COUNT)
    assert created["parameters"] == {"type": "object", "properties": {}, "required": []}


def test_a_change_of_query_publishes_the_next_version_and_keeps_the_first(publish, publisher, project):
    publish()
    url = endpoints_url(project.pk, "by-country")
    changed = {**COUNTRY_QUERY, "query": COUNTRY_QUERY["query"] + " AND event = '$pageview'"}

    response = publisher.patch(url, {"query": changed}, format="json")

    assert response.status_code == 200 and response.json()["version"] == 2
    versions = publisher.get(url + "versions/").json()["results"]
    assert [(item["version"], item["query"]) for item in versions] == [(1, COUNTRY_QUERY), (2, changed)]
    assert {"version", "query", "parameters", "created_at", "created_by"} == set(versions[0])


def test_a_change_of_description_or_cache_publishes_no_version(publish, publisher, project):
    publish()
    url = endpoints_url(project.pk, "by-country")

    response = publisher.patch(url, {"description": "Now described", "cache_seconds": 60}, format="json")

    assert response.json()["version"] == 1
    assert EndpointVersion.objects.count() == 1


def test_sending_the_same_query_again_publishes_no_version(publish, publisher, project):
    publish()
    response = publisher.patch(endpoints_url(project.pk, "by-country"), {"query": COUNTRY_QUERY}, format="json")
    assert response.json()["version"] == 1


def test_each_version_is_in_the_activity_log(publish, publisher, project):
    created = publish()
    parameters = {**COUNTRY_PARAMETERS, "properties": {**COUNTRY_PARAMETERS["properties"]}}
    parameters["properties"]["country"] = {"type": "string", "enum": ["DE", "FR", "US", "ES"]}

    publisher.patch(endpoints_url(project.pk, "by-country"), {"parameters": parameters}, format="json")

    entries = ActivityLog.objects.filter(scope="Endpoint", item_id=str(created["id"])).order_by("id")
    assert [entry.activity for entry in entries] == ["created", "updated"]
    assert entries[0].detail["after"]["version"] == 1
    assert entries[1].detail["before"]["version"] == 1 and entries[1].detail["after"]["version"] == 2
    assert entries[1].project_id == project.pk and entries[1].api_key_mask


def test_names_are_unique_in_a_project_but_not_across_projects(publish, publisher, project, charlie, key_client):
    publish(name="count", query=COUNT)

    response = publisher.post(endpoints_url(project.pk), {"name": "count", "query": COUNT}, format="json")

    assert response.status_code == 400
    assert (response.json()["attr"], response.json()["code"]) == ("name", "unique")
    other = key_client("endpoint:write", user=charlie)
    project_id = charlie.current_project_id
    assert other.post(endpoints_url(project_id), {"name": "count", "query": COUNT}, format="json").status_code == 201


@pytest.mark.parametrize("name", ["Has Caps", "-dash-first", "a/b", "x" * 129, ""])
def test_a_name_is_a_slug(publisher, project, name):
    response = publisher.post(endpoints_url(project.pk), {"name": name, "query": COUNT}, format="json")
    assert response.status_code == 400 and response.json()["attr"] == "name"


@pytest.mark.parametrize(
    "parameters, attr",
    [
        (
            {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}},
            "parameters__properties__a__maxLength",
        ),
        ({"type": "object", "properties": {"a": {"type": "date"}}}, "parameters__properties__a__type"),
        ({"type": "object", "additionalProperties": True}, "parameters__additionalProperties"),
        ({"type": "object", "properties": {}, "required": ["a"]}, "parameters__required__0"),
    ],
)
def test_a_schema_refused_is_named_by_its_path(publisher, project, parameters, attr):
    body = {"name": "count", "query": COUNT, "parameters": parameters}
    response = publisher.post(endpoints_url(project.pk), body, format="json")
    assert response.status_code == 400
    assert response.json()["attr"] == attr and response.json()["type"] == "validation_error"
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize(
    "query, attr",
    [
        ({"kind": "HogQLQuery", "query": "DELETE FROM events"}, "query"),
        ({"kind": "HogQLQuery", "query": "SELECT count() FROM persons"}, "query"),
        ({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "math": "nope"}]}, "query__series__0__math"),
        ({"kind": "Nope"}, "query__kind"),
        ({"kind": "HogQLQuery", "query": "SELECT {variables.missing} FROM events"}, "query"),
    ],
)
def test_a_query_is_validated_as_query_does_before_it_is_saved(publisher, project, query, attr):
    response = publisher.post(endpoints_url(project.pk), {"name": "bad", "query": query}, format="json")
    assert response.status_code == 400
    assert response.json()["attr"] == attr
    assert not Endpoint.objects.exists()


def test_a_json_placeholder_must_bind_to_a_valid_query(publisher, project):
    query = {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview"}],
        "dateRange": {"date_from": "{variables.since}"},
    }
    parameters = {"type": "object", "properties": {"since": {"type": "string", "default": "-30d"}}}
    response = publisher.post(
        endpoints_url(project.pk), {"name": "trend", "query": query, "parameters": parameters}, format="json"
    )
    assert response.status_code == 201
    parameters["properties"]["since"]["default"] = "last tuesday"
    response = publisher.patch(endpoints_url(project.pk, "trend"), {"parameters": parameters}, format="json")
    assert response.status_code == 400 and response.json()["attr"].startswith("query__dateRange")


def test_members_read_but_only_admins_write(publish, key_client, bob, project):
    publish()
    member = key_client("endpoint:write", user=bob)

    assert member.get(endpoints_url(project.pk, "by-country")).status_code == 200
    response = member.patch(endpoints_url(project.pk, "by-country"), {"description": "x"}, format="json")
    assert response.status_code == 403
    assert member.post(endpoints_url(project.pk), {"name": "mine", "query": COUNT}, format="json").status_code == 403
    assert member.delete(endpoints_url(project.pk, "by-country")).status_code == 403


def test_endpoint_read_runs_and_lists_but_cannot_write(publish, reader, project):
    publish()
    assert reader.get(endpoints_url(project.pk)).status_code == 200
    assert reader.get(endpoints_url(project.pk, "by-country", "run/") + "?country=DE").status_code == 200
    response = reader.patch(endpoints_url(project.pk, "by-country"), {"description": "x"}, format="json")
    assert response.status_code == 403 and "endpoint:write" in response.json()["detail"]


def test_query_read_alone_cannot_reach_endpoints(publish, key_client, project):
    publish()
    client = key_client("query:read")
    assert client.get(endpoints_url(project.pk)).status_code == 403
    assert client.get(endpoints_url(project.pk, "by-country", "run/") + "?country=DE").status_code == 403


def test_another_organizations_endpoint_is_not_found(publish, key_client, charlie, other_project, project):
    publish()
    endpoint_create(actor=charlie, project=other_project, name="theirs", query=COUNT, parameters={"type": "object"})
    client = key_client("endpoint:write")

    assert client.get(endpoints_url(other_project.pk)).status_code == 404
    assert client.get(endpoints_url(other_project.pk, "theirs", "run/")).status_code == 404
    assert client.get(endpoints_url(project.pk, "theirs")).status_code == 404
    assert client.get(endpoints_url(project.pk, "theirs", "run/")).status_code == 404
    names = [item["name"] for item in client.get(endpoints_url(project.pk)).json()["results"]]
    assert names == ["by-country"]


def test_delete_removes_the_endpoint_and_its_versions(publish, publisher, project):
    publish()
    assert publisher.delete(endpoints_url(project.pk, "by-country")).status_code == 204
    assert not Endpoint.objects.exists() and not EndpointVersion.objects.exists()
    assert publisher.get(endpoints_url(project.pk, "by-country", "run/")).status_code == 404


@pytest.mark.parametrize("count", [1, 8])
def test_list_query_count_is_flat(key_client, project, alice, count, django_assert_num_queries):
    client = key_client("endpoint:read")
    assert client.get(endpoints_url(project.pk)).status_code == 200  # the key's first use records last_used_at
    for index in range(count):
        endpoint_create(actor=alice, project=project, name=f"e{index}", query=COUNT, parameters={"type": "object"})

    # 1. key lookup (+user), 2. the project with the caller's membership, 3. the count, 4. the page (+creator join)
    with django_assert_num_queries(4):
        response = client.get(endpoints_url(project.pk))

    assert response.status_code == 200 and len(response.json()["results"]) == count


def test_a_key_limited_to_other_endpoints_finds_none_of_these(rf):
    limited = type("Key", (), {"endpoints": ["other"]})()
    request = rf.get("/")
    request.auth = limited
    assert not endpoint_name_allowed(request, "by-country")
    assert endpoint_name_allowed(request, "other")
    request.auth = type("Key", (), {"endpoints": []})()
    assert endpoint_name_allowed(request, "by-country")
    request.auth = None
    assert endpoint_name_allowed(request, "by-country")
