"""Embed secrets under a replaced encryption key: `rotate_embed_secrets` moves them to the newest key, and a secret no
configured key can read refuses its tokens (the same 404) rather than failing the page."""

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.test import Client

from dashboards.public.embeds import embed_token
from dashboards.public.models import EmbedSecret
from dashboards.public.services import embed_secret_create, embed_secret_value
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def rotate() -> str:
    out = io.StringIO()
    call_command("rotate_embed_secrets", stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def embed(settings, project, alice):
    settings.SECRETS_ENCRYPTION_KEYS = [OLD]
    secret, raw = embed_secret_create(actor=alice, project=project, name="Portal")
    dashboard = DashboardFactory(project=project, created_by=alice)
    DashboardTileFactory(dashboard=dashboard)
    token = embed_token(kid=secret.kid, secret=raw, resource={"dashboard": dashboard.pk}, properties=[])
    return secret, raw, f"/embed/{token}"


def test_secrets_move_to_the_newest_key_once(settings, embed):
    secret, raw, url = embed
    settings.SECRETS_ENCRYPTION_KEYS = [NEW, OLD]
    assert rotate() == "Rewrote 1 embed secret(s)."
    assert rotate() == "Rewrote 0 embed secret(s)."
    settings.SECRETS_ENCRYPTION_KEYS = [NEW]
    assert embed_secret_value(EmbedSecret.objects.get(pk=secret.pk)) == raw
    assert Client().get(url).status_code == 200


def test_a_secret_no_key_reads_refuses_its_tokens_and_the_command_says_why(settings, embed):
    _, _, url = embed
    settings.SECRETS_ENCRYPTION_KEYS = [NEW]
    response = Client().get(url)
    assert response.status_code == 404
    assert response.content == Client().get("/embed/not-a-token").content
    with pytest.raises(CommandError, match="cannot be decrypted"):
        rotate()
