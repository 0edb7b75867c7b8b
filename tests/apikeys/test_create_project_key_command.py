from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apikeys.models import ProjectSecretKey
from apikeys.services import hash_key
from tests.apikeys.conftest import bearer


def run(*args) -> list[str]:
    out = StringIO()
    call_command("create_project_key", *args, stdout=out)
    return out.getvalue().splitlines()


def test_prints_only_the_key_and_the_key_reaches_its_project(project, other_project):
    lines = run(str(project.id), "--scopes", "dashboard:read,endpoint:read", "--endpoints", "a, b", "--label", "CI")

    assert len(lines) == 1 and lines[0].startswith("phs_")
    key = ProjectSecretKey.objects.get(secure_value=hash_key(lines[0]))
    assert (key.project, key.label, key.scopes, key.endpoints) == (
        project,
        "CI",
        ["dashboard:read", "endpoint:read"],
        ["a", "b"],
    )
    assert key.created_by is None
    client = bearer(lines[0])
    assert client.get(f"/api/projects/{project.id}/dashboards/").status_code == 200
    assert client.get(f"/api/projects/{other_project.id}/dashboards/").status_code == 404


def test_defaults_to_all_endpoints_and_a_label(project):
    [plaintext] = run(str(project.id), "--scopes", "query:read")
    key = ProjectSecretKey.objects.get(secure_value=hash_key(plaintext))
    assert (key.label, key.endpoints) == ("Command-line key", [])


@pytest.mark.parametrize(
    "args,message",
    [
        (["--scopes", "*"], "cannot hold the scope '*'"),
        (["--scopes", "organization:read"], "cannot hold the scope 'organization:read'"),
        (["--scopes", "dashboard:destroy"], "Unknown scope 'dashboard:destroy'"),
        (["--scopes", "query:read", "--endpoints", "not a name"], "'not a name' is not an endpoint name"),
    ],
)
def test_refuses_what_a_projects_key_cannot_hold(project, args, message):
    with pytest.raises(CommandError, match=message):
        run(str(project.id), *args)
    assert not ProjectSecretKey.objects.exists()


def test_refuses_an_unknown_project(db):
    with pytest.raises(CommandError, match="Unknown project id: 999"):
        run("999", "--scopes", "query:read")
