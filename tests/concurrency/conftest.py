import pytest
from django.utils import timezone

from apikeys.models import PersonalAPIKey


@pytest.fixture
def used_key(issue_key):
    """used_key(user, *scopes) -> a plaintext key that has already been used this hour.

    A key in use is the realistic case: its hourly `last_used_at` stamp is already written, so the races are
    between the requests' own writes (tests/concurrency/test_key_stamp.py covers the stamp itself).
    """

    def issue(user, *scopes):
        plaintext = issue_key(user, *scopes)
        PersonalAPIKey.objects.filter(user=user).update(last_used_at=timezone.now())
        return plaintext

    return issue
