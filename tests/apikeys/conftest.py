"""Project keys for the tests of tests/apikeys: issued through the real service, as the API issues them."""

import pytest
from rest_framework.test import APIClient

from apikeys.services import project_key_create


@pytest.fixture
def issue_project_key(db):
    """issue_project_key(project, *scopes, actor=None, label=..., endpoints=...) -> (key, plaintext)."""

    def issue(project, *scopes, actor=None, label="Nightly job", endpoints=None):
        return project_key_create(actor=actor, project=project, label=label, scopes=list(scopes), endpoints=endpoints)

    return issue


@pytest.fixture
def project_key_client(project, alice, issue_project_key):
    """project_key_client(*scopes, project=project) -> APIClient sending a fresh key of that project, made by
    alice."""

    def make(*scopes, project=project, **options):
        _, plaintext = issue_project_key(project, *scopes, actor=options.pop("actor", alice), **options)
        return bearer(plaintext)

    return make


def bearer(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client
