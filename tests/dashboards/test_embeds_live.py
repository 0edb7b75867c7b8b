"""Embeds through the whole HTTP stack (gunicorn, every middleware): the frame-ancestors the secret allows replace the
default policy's, a rotated secret's link is a 404 at once, and a token of the longest length allowed reaches the
service, through gunicorn (which reads gunicorn.conf.py from the working directory, as `make serve` gives it) and
through the development server."""

import datetime as dt

import pytest

from dashboards.public.embeds import MAX_TOKEN_LENGTH, embed_token
from dashboards.public.services import embed_secret_create, embed_secret_rotate
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory

CHROME = [{"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}]


def test_an_embed_over_http_is_framed_by_its_origins_and_ends_with_its_secret(live_service, alice, project):
    secret, raw = embed_secret_create(
        actor=alice,
        project=project,
        name="Portal",
        allowed_origins=["https://portal.example.com", "http://localhost:8080"],
    )
    dashboard = DashboardFactory(project=project, created_by=alice, name="Shop numbers")
    DashboardTileFactory(dashboard=dashboard, insight__name="Page views")
    token = embed_token(
        kid=secret.kid,
        secret=raw,
        resource={"dashboard": dashboard.pk},
        properties=CHROME,
        expires_in=dt.timedelta(minutes=5),
    )
    url = f"{live_service.url}/embed/{token}"

    page = live_service.session.get(url)
    assert page.status_code == 200 and "Shop numbers" in page.text
    policies = [part.strip() for part in page.headers["Content-Security-Policy"].split(";")]
    assert [part for part in policies if part.startswith("frame-ancestors")] == [
        "frame-ancestors https://portal.example.com http://localhost:8080"
    ]
    assert "X-Frame-Options" not in page.headers
    as_json = live_service.session.get(url, params={"format": "json"})
    assert as_json.status_code == 200
    assert as_json.json()["locked"]["properties"] == CHROME

    embed_secret_rotate(actor=alice, secret=secret)
    refused = live_service.session.get(url)
    assert refused.status_code == 404
    assert "Shop numbers" not in refused.text
    assert "frame-ancestors 'none'" in refused.headers["Content-Security-Policy"]


def longest_token(secret, raw: str, dashboard) -> tuple[str, list[dict]]:
    """A valid token as long as allowed, or a few characters short of it (base64 grows in steps): its locked
    properties' keys padded to the length that gets there."""

    def signed(padding: int) -> tuple[str, list[dict]]:
        keys = [f"p{index:02d}" + "k" * min(300, max(0, padding - 300 * index)) for index in range(20)]
        properties = [{"key": key, "value": "x", "operator": "exact", "type": "event"} for key in keys]
        resource = {"dashboard": dashboard.pk}
        return embed_token(kid=secret.kid, secret=raw, resource=resource, properties=properties), properties

    low, high = 0, 20 * 300  # the longest padding whose token fits, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if len(signed(middle)[0]) <= MAX_TOKEN_LENGTH else (low, middle - 1)
    return signed(low)


@pytest.mark.parametrize("server", ["gunicorn", "runserver"])
def test_a_token_of_the_documented_length_reaches_the_service(start_live_service, alice, project, server):
    """Issue 51: gunicorn's default request line (4,094 bytes) answered a token over about 4 KB with its own 400."""
    secret, raw = embed_secret_create(actor=alice, project=project, name="Portal", allowed_origins=[])
    dashboard = DashboardFactory(project=project, created_by=alice, name="Shop numbers")
    DashboardTileFactory(dashboard=dashboard, insight__name="Page views")
    token, properties = longest_token(secret, raw, dashboard)
    service = start_live_service(server=server)

    page = service.session.get(f"{service.url}/embed/{token}", params={"format": "json"})
    too_long = service.session.get(f"{service.url}/embed/{token}x", params={"format": "json"})
    garbage = service.session.get(f"{service.url}/embed/not-a-token", params={"format": "json"})

    assert MAX_TOKEN_LENGTH - 4 <= len(token) <= MAX_TOKEN_LENGTH
    assert page.status_code == 200, page.text[:300]
    assert page.json()["locked"]["properties"] == properties
    # One character more is the service's own refusal, the same as any token that grants nothing.
    assert too_long.status_code == 404 and too_long.content == garbage.content


def test_gunicorn_still_refuses_a_request_line_past_its_limit(start_live_service):
    service = start_live_service()

    refused = service.session.get(f"{service.url}/embed/{'x' * 17_000}")
    served = service.session.get(f"{service.url}/embed/{'x' * 15_000}")

    assert refused.status_code == 400 and "Request Line is too large" in refused.text
    assert served.status_code == 404  # read, and judged by the service: no token
