import pytest
from django.core.exceptions import ValidationError

from organizations.models import Membership
from organizations.services import membership_delete, membership_update_level


def test_the_last_owner_cannot_be_demoted(alice, organization):
    membership = Membership.objects.get(user=alice, organization=organization)
    with pytest.raises(ValidationError) as error:
        membership_update_level(actor=alice, membership=membership, level=Membership.Level.ADMIN)
    assert error.value.error_dict["level"][0].code == "last_owner"
    membership.refresh_from_db()
    assert membership.level == Membership.Level.OWNER


def test_an_owner_can_be_demoted_while_another_remains(alice, bob, organization):
    Membership.objects.filter(user=bob).update(level=Membership.Level.OWNER)
    membership = membership_update_level(
        actor=alice,
        membership=Membership.objects.get(user=alice, organization=organization),
        level=Membership.Level.MEMBER,
    )
    assert membership.level == Membership.Level.MEMBER


def test_the_last_owner_cannot_be_deleted(alice, organization):
    with pytest.raises(ValidationError):
        membership_delete(actor=alice, membership=Membership.objects.get(user=alice, organization=organization))
    assert Membership.objects.filter(user=alice).exists()
