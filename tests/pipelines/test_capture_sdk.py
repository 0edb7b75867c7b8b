"""The reference's official Python SDK (`posthog` from PyPI), unchanged, sends events to a live copy of the service.

The SDK is pointed at the live server with a project's token; it batches events in a background thread and posts
them to /batch/, gzip-compressed or not. A guard on `requests` refuses any request to another host, so the SDK can
never reach the internet (it would only try for feature flags, which need a key these tests do not give it).
"""

import datetime as dt
import json
import uuid

import posthog
import pytest
import requests

from organizations.services import project_rotate_api_token
from pipelines.events.models import Event


@pytest.fixture
def sdk_requests(live_service, monkeypatch):
    """Every request the SDK makes, as (method, path, Content-Encoding); any other host fails the test."""
    monkeypatch.delenv("POSTHOG_CAPTURE_MODE", raising=False)  # the legacy /batch/ protocol, the SDK's default
    made = []
    send = requests.Session.send

    def only_the_live_service(session, request, **kwargs):
        assert request.url.startswith(live_service.url + "/"), f"The SDK tried to reach {request.url}"
        made.append(
            (request.method, request.url.removeprefix(live_service.url), request.headers.get("Content-Encoding"))
        )
        return send(session, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", only_the_live_service)
    return made


def sdk(live_service, token: str, errors: list, **options) -> posthog.Posthog:
    return posthog.Posthog(
        project_api_key=token,
        host=live_service.url,
        on_error=lambda error, batch: errors.append(error),
        max_retries=0,
        enable_exception_autocapture=False,
        **options,
    )


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "plain"])
def test_events_sent_by_the_official_sdk_are_stored(live_service, sdk_requests, project, other_project, compress):
    errors = []
    client = sdk(live_service, project.api_token, errors, gzip=compress)
    base = dt.datetime(2026, 11, 3, 12, 30, 15, 250000, tzinfo=dt.UTC)
    sent_uuid = str(uuid.uuid4())
    captured = [
        ("$pageview", "anon-1", {"$current_url": "https://shop.example/"}, base),
        ("signed up", "user-1", {"plan": "pro", "seats": 3, "trial": True}, base + dt.timedelta(minutes=5)),
        (
            "purchase",
            "user-1",
            {"items": [{"sku": "A-1", "price": 9.5}], "note": "Grüße 😀"},
            base - dt.timedelta(days=40),
        ),
    ]
    for name, distinct_id, properties, timestamp in captured:
        client.capture(name, distinct_id=distinct_id, properties=properties, timestamp=timestamp)
    client.capture("with uuid", distinct_id="user-2", uuid=sent_uuid, timestamp=base)
    client.capture("with uuid", distinct_id="user-2", uuid=sent_uuid, timestamp=base)  # a retry: stored once
    client.flush()
    client.shutdown()

    assert errors == []
    assert sdk_requests and {(method, path) for method, path, _ in sdk_requests} == {("POST", "/batch/")}
    assert {encoding for _, _, encoding in sdk_requests} == ({"gzip"} if compress else {None})
    stored = list(Event.objects.filter(project=project).order_by("timestamp", "id"))
    assert [(row.event, row.distinct_id, row.timestamp) for row in stored] == [
        ("purchase", "user-1", base - dt.timedelta(days=40)),
        ("$pageview", "anon-1", base),
        ("with uuid", "user-2", base),
        ("signed up", "user-1", base + dt.timedelta(minutes=5)),
    ]
    by_name = {row.event: row for row in stored}
    for name, _, properties, _ in captured:
        assert by_name[name].properties.items() >= properties.items()
        assert by_name[name].properties["$lib"] == "posthog-python"
    assert str(by_name["with uuid"].uuid) == sent_uuid
    assert not Event.objects.filter(project=other_project).exists()


def test_the_sdk_is_told_401_for_a_rotated_token(live_service, sdk_requests, project, alice):
    old_token = project.api_token
    project_rotate_api_token(actor=alice, project=project)
    errors = []
    client = sdk(live_service, old_token, errors)
    client.capture("$pageview", distinct_id="anon-1")
    client.flush()
    client.shutdown()

    assert [getattr(error, "status", None) for error in errors] == [401]
    assert not Event.objects.exists()


def test_a_chunked_body_is_read(live_service, project):
    # No Content-Length: the WSGI server undoes the chunking and the view reads to the end.
    body = json.dumps({"api_key": project.api_token, "batch": [{"event": "chunked", "distinct_id": "u"}]}).encode()
    response = requests.post(f"{live_service.url}/batch/", data=iter([body[:10], body[10:]]), timeout=10)
    assert response.status_code == 200, response.text
    assert list(Event.objects.filter(project=project).values_list("event", flat=True)) == ["chunked"]
