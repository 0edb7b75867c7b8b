import io
import shutil
import stat
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apikeys.models import PersonalAPIKey
from organizations.demo import create_demo_data
from organizations.models import Domain, Invite, Membership, Project
from pipelines.demo import DEMO_EVENTS
from pipelines.events.models import Event


def test_seed_demo_adds_a_member_an_invite_a_domain_and_events(db, capsys):
    call_command("seed_demo")
    project = Project.objects.get(organization__name="Demo organization")
    assert f"token for sending events: {project.api_token}" in capsys.readouterr().out
    assert Event.objects.filter(project=project).count() == DEMO_EVENTS
    assert Membership.objects.filter(user__email="member@example.com", level=Membership.Level.MEMBER).exists()
    assert Invite.objects.filter(target_email="invitee@example.com").exists()
    assert Domain.objects.filter(domain="demo.example.com", verified_at__isnull=True).exists()


def test_seed_demo_migrates_first_when_asked(db, settings, tmp_path):
    """`make run` migrates and seeds in one process (`seed_demo --migrate`): the service starts once, not twice."""
    settings.DEMO_KEY_FILE = tmp_path / "demo-key"
    out = io.StringIO()

    call_command("seed_demo", "--migrate", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "Operations to perform:" and any(line.strip() == "No migrations to apply." for line in lines)
    assert Project.objects.filter(organization__name="Demo organization").exists()
    assert lines[-1].startswith("phx_")


def seed(settings, key_file) -> list[str]:
    settings.DEMO_KEY_FILE = key_file
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue().splitlines()


class TestDemoKey:
    def test_the_key_is_kept_for_its_owner_only_and_reused(self, db, settings, tmp_path):
        key_file = tmp_path / "data" / "demo-key"
        first = seed(settings, key_file)
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert key_file.read_text().strip() == first[-1]
        second = seed(settings, key_file)
        assert second[-1] == first[-1]
        assert "the same as last time" in second[-2]
        [key] = PersonalAPIKey.objects.all()
        assert key.scopes == ["*"]
        assert key.expires_at is not None

    def test_the_key_works(self, db, settings, tmp_path):
        plaintext = seed(settings, tmp_path / "demo-key")[-1]
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        assert client.get("/api/users/@me/").json()["email"] == "admin@example.com"

    @pytest.mark.parametrize("spoil", ["revoke", "expire", "delete_file", "garble_file", "narrow"])
    def test_a_key_that_no_longer_works_is_replaced(self, db, settings, tmp_path, spoil):
        key_file = tmp_path / "demo-key"
        old = seed(settings, key_file)[-1]
        key = PersonalAPIKey.objects.get()
        if spoil == "revoke":
            key.revoked_at = timezone.now()
        elif spoil == "expire":
            key.expires_at = timezone.now() - timedelta(seconds=1)
        elif spoil == "narrow":
            key.scopes = ["dashboard:read"]
        key.save()
        if spoil == "delete_file":
            key_file.unlink()
        elif spoil == "garble_file":
            key_file.write_text("not a key\n")
        new = seed(settings, key_file)[-1]
        assert new != old
        assert key_file.read_text().strip() == new
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert PersonalAPIKey.objects.count() == 2

    def test_a_group_readable_file_is_made_private_again(self, db, settings, tmp_path):
        key_file = tmp_path / "demo-key"
        key_file.write_text("stale\n")
        key_file.chmod(0o644)
        seed(settings, key_file)
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_printed_links_follow_site_url(db, settings, tmp_path):
    settings.SITE_URL = "http://0.0.0.0:8010"
    lines = seed(settings, tmp_path / "demo-key")
    assert lines[0].startswith("Admin:        http://0.0.0.0:8010/admin/")
    assert "API docs:     http://0.0.0.0:8010/api/docs/" in lines
    assert "API:          http://0.0.0.0:8010/api" in lines
    assert not [line for line in lines if ":8000" in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_passes_its_address_as_site_url():
    root = Path(__file__).resolve().parents[2]
    commands = subprocess.run(
        ["make", "-n", "run", "HOST=0.0.0.0", "PORT=8010"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    [line] = [line for line in commands if "scripts/run.sh" in line]
    assert line.startswith("SITE_URL=http://0.0.0.0:8010 HOST=0.0.0.0 PORT=8010 "), line
    script = (root / "scripts" / "run.sh").read_text()
    assert "export SITE_URL=${SITE_URL:-http://$HOST:$PORT}" in script
    assert '"$PY" manage.py seed_demo --migrate' in script
    assert '"$PY" manage.py runserver --skip-checks "$HOST:$PORT"' in script


def test_demo_data_can_be_added_twice_to_one_organization(alice, organization, project):
    # The benchmark seeds one organization many times; an email has one pending invite.
    for _ in range(2):
        create_demo_data(user=alice, organization=organization, project=project)
    assert Invite.objects.filter(organization=organization, target_email="invitee@example.com").count() == 1
