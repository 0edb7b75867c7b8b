"""A key's hourly `last_used_at` stamp never makes one request wait for another with the same key."""

import threading

import pytest
import requests
from django.db import connections, transaction

from apikeys.models import PersonalAPIKey

pytestmark = pytest.mark.requires_postgres


def test_a_write_is_not_held_up_by_another_transaction_holding_the_keys_row(live_service, alice, project, issue_key):
    key = issue_key(alice, "project:write")
    api_key = PersonalAPIKey.objects.get(user=alice)
    assert api_key.last_used_at is None
    locked, release = threading.Event(), threading.Event()

    def hold_the_keys_row():
        # Another request's transaction that stamped the key and has not committed yet.
        with transaction.atomic(using="default"):
            PersonalAPIKey.objects.select_for_update().filter(pk=api_key.pk).update(last_used_at=None)
            locked.set()
            release.wait(timeout=30)
        connections["default"].close()

    holder = threading.Thread(target=hold_the_keys_row)
    holder.start()
    try:
        assert locked.wait(timeout=10)
        response = requests.patch(
            f"{live_service.url}/api/projects/{project.id}/",
            json={"name": "Renamed"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=5,  # the row stays locked for up to 30 s: waiting for it would time out here
        )
    finally:
        release.set()
        holder.join()

    assert response.status_code == 200
    assert response.json()["name"] == "Renamed"
