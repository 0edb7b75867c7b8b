"""Issuing a key in admin runs a fixed number of statements, named here one by one. The service joins admin's
transaction: no SAVEPOINT and RELEASE of its own (2 statements, before it did)."""

from apikeys.models import PersonalAPIKey


def test_admin_key_issue(admin_client, alice, django_assert_num_queries):
    url = "/admin/apikeys/personalapikey/add/"
    assert admin_client.get(url).status_code == 200
    body = {"user": alice.pk, "label": "CI", "scopes": ["*"], "expires_in_days": ""}

    # 1. the session, 2. the operator, 3. admin's transaction opens (a SAVEPOINT in a test, BEGIN otherwise), 4. the
    # chosen user, 5. the form's check of the key's user, 6-7. the service's full_clean: the user again, and that the
    # digest is unique, 8. the key's INSERT, 9. the activity entry, 10. admin's log entry, 11. the transaction ends
    with django_assert_num_queries(11):
        response = admin_client.post(url, body)

    assert response.status_code == 302, response.content[:2000]
    assert PersonalAPIKey.objects.filter(user=alice, label="CI").exists()
