import factory

from organizations.models import Domain, Invite, Membership, Organization, Project
from tests.workspace.factories import UserFactory


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    name = factory.Sequence(lambda n: f"Organization {n}")
    slug = factory.Sequence(lambda n: f"organization-{n}")


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Project {n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    organization = factory.SubFactory(OrganizationFactory)
    user = factory.SubFactory(UserFactory)
    level = Membership.Level.MEMBER


class InviteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Invite

    organization = factory.SubFactory(OrganizationFactory)
    target_email = factory.Sequence(lambda n: f"invitee{n}@example.com")
    level = Membership.Level.MEMBER


class DomainFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Domain

    organization = factory.SubFactory(OrganizationFactory)
    domain = factory.Sequence(lambda n: f"domain{n}.example.com")
