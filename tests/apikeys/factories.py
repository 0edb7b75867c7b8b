import factory
from oauth2_provider.models import Application

from apikeys.oauth.models import ConnectedApp


class ApplicationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Application

    name = factory.Sequence(lambda n: f"Agent {n}")
    client_type = Application.CLIENT_PUBLIC
    authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
    redirect_uris = "http://127.0.0.1:8765/callback"


class ConnectedAppFactory(factory.django.DjangoModelFactory):
    """A consent whose code was exchanged (it has a token family), as a person sees it among their connected apps."""

    class Meta:
        model = ConnectedApp

    application = factory.SubFactory(ApplicationFactory)
    organization = factory.SelfAttribute("project.organization")
    scopes = ["dashboard:read"]
    token_family = factory.Faker("uuid4")
