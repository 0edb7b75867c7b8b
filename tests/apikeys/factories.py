import factory

from apikeys.models import ProjectSecretKey
from apikeys.oauth.models import ConnectedApp
from apikeys.services import generate_key, hash_key, mask_key
from tests.oauth2_provider.factories import ApplicationFactory
from tests.organizations.factories import ProjectFactory
from tests.workspace.factories import UserFactory


class ProjectSecretKeyFactory(factory.django.DjangoModelFactory):
    """A project's key; its plaintext is not kept (issue one with `project_key_create` to use it)."""

    class Meta:
        model = ProjectSecretKey

    class Params:
        plaintext = factory.LazyFunction(lambda: generate_key("phs_"))

    project = factory.SubFactory(ProjectFactory)
    label = factory.Sequence(lambda n: f"Project key {n}")
    secure_value = factory.LazyAttribute(lambda key: hash_key(key.plaintext))
    mask_value = factory.LazyAttribute(lambda key: mask_key(key.plaintext, "phs_"))
    scopes = factory.LazyFunction(lambda: ["dashboard:read", "query:read"])
    endpoints = factory.LazyFunction(lambda: ["weekly-signups"])


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
