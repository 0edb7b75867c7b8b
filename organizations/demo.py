"""Demo records for `manage.py seed_demo`: a second member, a pending invite and an unverified domain."""

from organizations.models import Domain, Invite, Membership, Organization
from workspace.models import User

DEMO_MEMBER_EMAIL = "member@example.com"


def create_demo_data(*, user, organization: Organization, project) -> None:
    member, _ = User.objects.get_or_create(
        email=DEMO_MEMBER_EMAIL, defaults={"first_name": "Demo", "last_name": "Member"}
    )
    Membership.objects.get_or_create(
        organization=organization, user=member, defaults={"level": Membership.Level.MEMBER}
    )
    # Created directly rather than through invite_create, so seeding sends no email; once per organization, as
    # an email has one pending invite (the benchmark seeds the same organization several times).
    Invite.objects.get_or_create(
        organization=organization,
        target_email="invitee@example.com",
        accepted_at=None,
        defaults={"created_by": user},
    )
    if not Domain.objects.filter(domain="demo.example.com").exists():
        Domain.objects.create(organization=organization, domain="demo.example.com")
