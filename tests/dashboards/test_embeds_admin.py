"""Embed secrets in admin: never shown, never added there; renamed, their origins changed and deleted through the
services, each change in the activity log."""

import json

from django.urls import reverse

from dashboards.public.models import EmbedSecret
from dashboards.public.services import embed_secret_create
from workspace.models import ActivityLog


def change_url(secret) -> str:
    return reverse("admin:dashboards_embedsecret_change", args=[secret.pk])


def test_origins_change_through_the_service_and_are_recorded(admin_client, project, alice):
    secret, raw = embed_secret_create(actor=alice, project=project, name="Portal")
    page = admin_client.get(change_url(secret)).content.decode()
    assert secret.kid in page and raw not in page and secret.secret_encrypted not in page
    response = admin_client.post(
        change_url(secret), {"name": "Portal", "allowed_origins": json.dumps(["HTTPS://Portal.Example.com"])}
    )
    assert response.status_code == 302
    secret.refresh_from_db()
    assert secret.allowed_origins == ["https://portal.example.com"]
    entry = ActivityLog.objects.get(scope="EmbedSecret", item_id=str(secret.pk), activity="updated")
    assert entry.project_id == project.pk and raw not in json.dumps(entry.detail)


def test_an_origin_that_is_not_one_is_refused(admin_client, project, alice):
    secret, _ = embed_secret_create(actor=alice, project=project, name="Portal")
    response = admin_client.post(
        change_url(secret), {"name": "Portal", "allowed_origins": json.dumps(["https://portal.example.com/path"])}
    )
    assert response.status_code == 200 and "Not an origin" in response.content.decode()
    assert EmbedSecret.objects.get().allowed_origins == []


def test_secrets_are_not_added_in_admin_and_deleting_is_recorded(admin_client, project, alice):
    secret, _ = embed_secret_create(actor=alice, project=project, name="Portal")
    assert admin_client.get(reverse("admin:dashboards_embedsecret_add")).status_code == 403
    response = admin_client.post(reverse("admin:dashboards_embedsecret_delete", args=[secret.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not EmbedSecret.objects.exists()
    assert ActivityLog.objects.filter(scope="EmbedSecret", item_id=str(secret.pk), activity="deleted").exists()
