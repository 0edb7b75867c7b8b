import factory

from apikeys.models import ProjectSecretKey
from apikeys.services import generate_key, hash_key, mask_key
from tests.organizations.factories import ProjectFactory


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
