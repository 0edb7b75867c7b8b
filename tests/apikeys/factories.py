import factory

from apikeys.oauth.models import ConnectedApp
from tests.oauth2_provider.factories import ApplicationFactory
from tests.organizations.factories import ProjectFactory
from tests.workspace.factories import UserFactory


class ConnectedAppFactory(factory.django.DjangoModelFactory):
    """A consent whose code was exchanged (it has a token family), as a person sees it among their connected apps."""

    class Meta:
        model = ConnectedApp

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    project = factory.SubFactory(ProjectFactory)
    organization = factory.SelfAttribute("project.organization")
    scopes = ["dashboard:read"]
    token_family = factory.Faker("uuid4")
