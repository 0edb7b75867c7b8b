import factory

from dashboards.models import Dashboard, DashboardCollaborator, DashboardTag, DashboardTile, SharingConfiguration
from tests.organizations.factories import ProjectFactory
from tests.workspace.factories import UserFactory


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


class DashboardTileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DashboardTile

    dashboard = factory.SubFactory(DashboardFactory)
    type = DashboardTile.Type.INSIGHT
    name = factory.Sequence(lambda n: f"Tile {n}")
    query = factory.LazyFunction(lambda: {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]})
    filters = factory.LazyFunction(dict)
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
