import factory

from dashboards.core.models import (
    Dashboard,
    DashboardCollaborator,
    DashboardTag,
    DashboardTile,
    Insight,
    InsightTag,
    SharingConfiguration,
    Text,
)
from dashboards.public.models import EmbedSecret
from tests.organizations.factories import ProjectFactory
from tests.workspace.factories import UserFactory
from workspace.secrets import encrypt


class DashboardFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Dashboard
        skip_postgeneration_save = True

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"Dashboard {n}")
    created_by = factory.SubFactory(UserFactory)

    @factory.post_generation
    def tags(self, create, extracted, **kwargs):
        # DashboardFactory(tags=["a", "b"]) stores one tag row each.
        if create and extracted:
            DashboardTag.objects.bulk_create([DashboardTag(dashboard=self, name=name) for name in extracted])


class InsightFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Insight
        skip_postgeneration_save = True

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"Insight {n}")
    query = factory.LazyFunction(lambda: {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]})
    filters = factory.LazyFunction(dict)
    created_by = factory.SubFactory(UserFactory)
    last_modified_by = factory.SelfAttribute("created_by")

    @factory.post_generation
    def tags(self, create, extracted, **kwargs):
        if create and extracted:
            InsightTag.objects.bulk_create([InsightTag(insight=self, name=name) for name in extracted])


class TextFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Text

    project = factory.SubFactory(ProjectFactory)
    body = factory.Sequence(lambda n: f"Notes {n}")
    created_by = factory.SubFactory(UserFactory)
    last_modified_by = factory.SelfAttribute("created_by")


class DashboardTileFactory(factory.django.DjangoModelFactory):
    """An insight tile (a new insight of the dashboard's project) by default; `text_tile=True` for a text tile."""

    class Meta:
        model = DashboardTile

    class Params:
        text_tile = factory.Trait(
            insight=None,
            text=factory.SubFactory(TextFactory, project=factory.SelfAttribute("..dashboard.project")),
        )

    dashboard = factory.SubFactory(DashboardFactory)
    insight = factory.SubFactory(InsightFactory, project=factory.SelfAttribute("..dashboard.project"))
    text = None
    layouts = factory.LazyFunction(lambda: {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}})
    order = factory.Sequence(lambda n: n)


class DashboardCollaboratorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DashboardCollaborator

    dashboard = factory.SubFactory(DashboardFactory)
    user = factory.SubFactory(UserFactory)
    level = 37


class SharingConfigurationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SharingConfiguration

    dashboard = factory.SubFactory(DashboardFactory)


class EmbedSecretFactory(factory.django.DjangoModelFactory):
    """An embed secret, encrypted as the service keeps it (its plaintext is `es_test-<n>`)."""

    class Meta:
        model = EmbedSecret

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"Portal {n}")
    secret_encrypted = factory.Sequence(lambda n: encrypt(f"es_test-{n}".encode()).decode())
    allowed_origins = factory.LazyFunction(lambda: ["https://portal.example.com"])
