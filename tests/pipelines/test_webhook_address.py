"""A notification webhook that points at the service's own network is refused when it is written (400 naming the
field), not only at each delivery, unless private destinations are allowed (DECISIONS.md §17, outbound safety)."""

import pytest

from pipelines.batch_exports.models import BatchExport
from tests.pipelines.factories import BatchExportFactory

NEW_EXPORT = {"name": "Watched", "destination": {"type": "NoOp", "config": {}}, "interval": "hour"}
REFUSED = [
    "http://127.0.0.1:8000/hook",
    "http://localhost/hook",
    "https://[::1]/hook",
    "http://10.0.0.8/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://0.0.0.0:9/",
    "http://[::ffff:127.0.0.1]/hook",
    # Issue 51: other spellings of loopback and private addresses.
    "http://localhost./hook",
    "http://LocalHost../hook",
    "http://app.localhost/hook",
    "http://ip6-localhost/hook",
    "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
    "http://[2002:a00:1::1]/hook",  # 6to4 of 10.0.0.1
    "http://[64:ff9b::7f00:1]/hook",  # NAT64 of 127.0.0.1
    "http://[::127.0.0.1]/hook",  # IPv4-compatible
    "http://[::ffff:0:7f00:1]/hook",  # IPv4-translated
    "http://[::ffff:a00:1]/hook",  # IPv4-mapped 10.0.0.1, in hex
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook",  # Teredo, its client 127.0.0.1
    "http://2130706433/hook",  # 127.0.0.1 as one number
    "http://0x7f.1/hook",
    "http://127.1/hook",
    "http://0177.0.0.1/hook",
]


def exports_url(project) -> str:
    return f"/api/projects/{project.pk}/batch_exports/"


@pytest.fixture
def writer(live_service, alice, issue_key):
    key = issue_key(alice, "batch_export:write")
    live_service.session.headers["Authorization"] = f"Bearer {key}"
    yield live_service
    live_service.session.headers.pop("Authorization", None)


@pytest.mark.parametrize("url", REFUSED)
def test_a_webhook_on_the_services_network_is_a_400_and_creates_nothing(writer, project, url):
    response = writer.session.post(
        writer.url + exports_url(project), json={**NEW_EXPORT, "notifications": {"webhook_url": url}}
    )

    assert response.status_code == 400, response.text
    body = response.json()
    assert body["attr"] == "notifications__webhook_url"
    assert body["code"] == "refused_address"
    assert "BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS" in body["detail"] or "metadata" in body["detail"]
    assert not BatchExport.objects.exists()


def test_a_patch_to_a_loopback_webhook_is_a_400_and_keeps_the_old_one(writer, project):
    export = BatchExportFactory(project=project, notifications_webhook_url="https://hooks.example.com/a")

    response = writer.session.patch(
        f"{writer.url}{exports_url(project)}{export.pk}/", json={"notifications": {"webhook_url": "http://127.0.0.1/"}}
    )

    assert response.status_code == 400
    assert response.json()["attr"] == "notifications__webhook_url"
    export.refresh_from_db()
    assert export.notifications_webhook_url == "https://hooks.example.com/a"


def test_a_name_that_does_not_resolve_now_is_kept_for_the_delivery_to_decide(api_client, project):
    response = api_client.post(
        exports_url(project), {**NEW_EXPORT, "notifications": {"webhook_url": "https://hooks.invalid/x"}}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert response.json()["notifications"]["webhook_url"] == "https://hooks.invalid/x"


def test_private_webhooks_are_stored_where_private_destinations_are_allowed(api_client, project, settings):
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = True

    response = api_client.post(
        exports_url(project), {**NEW_EXPORT, "notifications": {"webhook_url": "http://127.0.0.1:9/"}}, format="json"
    )

    assert response.status_code == 201, response.json()
