"""Embeds through the whole HTTP stack (gunicorn, every middleware): the frame-ancestors the secret allows replace the
default policy's, and a rotated secret's link is a 404 at once."""

import datetime as dt

from dashboards.public.embeds import embed_token
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
