from django.core.management import call_command

from organizations.models import Domain, Invite, Membership


def test_seed_demo_adds_a_member_an_invite_and_a_domain(db, capsys):
    call_command("seed_demo")
    assert Membership.objects.filter(user__email="member@example.com", level=Membership.Level.MEMBER).exists()
    assert Invite.objects.filter(target_email="invitee@example.com").exists()
    assert Domain.objects.filter(domain="demo.example.com", verified_at__isnull=True).exists()
