import datetime as dt
import uuid

import factory
from django.utils import timezone

from pipelines.batch_exports.models import BatchExport, BatchExportBackfill, BatchExportRun, BatchExportRunLog
from pipelines.clickhouse.models import SyncStream
from pipelines.endpoints.models import Endpoint, EndpointVersion
from pipelines.events.models import Event, EventDefinition, Person, PersonDistinctId, PropertyDefinition, PropertyType
from pipelines.plugins.models import Plugin, PluginConfig, PluginSourceFile
from tests.organizations.factories import OrganizationFactory, ProjectFactory


class BatchExportFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BatchExport

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"Export {n}")
    destination_type = "S3"
    # A complete S3 config, secret included, so tests can check it never comes back.
    destination_config = factory.LazyFunction(
        lambda: {
            "bucket_name": "my-bucket",
            "region": "eu-west-1",
            "prefix": "events/",
            "aws_access_key_id": "AKIAEXAMPLE",
            "aws_secret_access_key": "s3-secret-value",
            "file_format": "JSONLines",
            "compression": "gzip",
        }
    )
    interval = "hour"


class BatchExportRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BatchExportRun

    batch_export = factory.SubFactory(BatchExportFactory)
    status = BatchExportRun.Status.COMPLETED
    data_interval_start = factory.LazyFunction(lambda: timezone.now() - dt.timedelta(hours=1))
    data_interval_end = factory.LazyFunction(timezone.now)
    records_completed = 10


class BatchExportBackfillFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BatchExportBackfill

    batch_export = factory.SubFactory(BatchExportFactory)
    start_at = factory.LazyFunction(lambda: timezone.now() - dt.timedelta(days=1))
    end_at = factory.LazyFunction(timezone.now)
    status = BatchExportRun.Status.STARTING


class BatchExportRunLogFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BatchExportRunLog

    run = factory.SubFactory(BatchExportRunFactory)
    message = factory.Sequence(lambda n: f"Log line {n}")


class PluginFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Plugin

    organization = factory.SubFactory(OrganizationFactory)
    collection = Plugin.Collection.DESTINATION
    plugin_type = Plugin.PluginType.CUSTOM
    name = factory.Sequence(lambda n: f"Plugin {n}")
    tag = "1.0.0"


class PluginSourceFileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PluginSourceFile

    plugin = factory.SubFactory(PluginFactory)
    filename = factory.Sequence(lambda n: f"file{n}.ts")
    source = "export function onEvent() {}\n"


class PluginConfigFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PluginConfig

    plugin = factory.SubFactory(PluginFactory)
    project = factory.SubFactory(ProjectFactory)
    enabled = True
    config = factory.LazyFunction(dict)


class EventFactory(factory.django.DjangoModelFactory):
    """An event row as an ingest stores it (without its uuid in the ledger: reads do not look there)."""

    class Meta:
        model = Event

    uuid = factory.LazyFunction(uuid.uuid4)
    project = factory.SubFactory(ProjectFactory)
    event = "$pageview"
    distinct_id = factory.Sequence(lambda n: f"user-{n}")
    properties = factory.LazyFunction(lambda: {"$current_url": "https://example.com/"})
    timestamp = factory.LazyFunction(timezone.now)


class EventDefinitionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = EventDefinition

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"event-{n}")


class PropertyDefinitionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PropertyDefinition

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"property-{n}")
    property_type = PropertyType.STRING


class PersonFactory(factory.django.DjangoModelFactory):
    """A person with one distinct id (`distinct_ids=[...]` for others, `distinct_ids=[]` for none)."""

    class Meta:
        model = Person
        skip_postgeneration_save = True

    project = factory.SubFactory(ProjectFactory)
    properties = factory.LazyFunction(lambda: {"email": "someone@example.com"})

    @factory.post_generation
    def distinct_ids(self, create, extracted, **kwargs):
        if not create:
            return
        ids = [f"person-{self.uuid.hex[:12]}"] if extracted is None else extracted
        for distinct_id in ids:
            PersonDistinctId.objects.create(project=self.project, distinct_id=distinct_id, person=self)


class SyncStreamFactory(factory.django.DjangoModelFactory):
    """Where the events sync stands on its events stream, a batch in flight."""

    class Meta:
        model = SyncStream
        django_get_or_create = ("name",)

    name = SyncStream.Name.EVENTS
    after_id = 41
    through_id = 57
    rows = 41
    synced_at = factory.LazyFunction(timezone.now)
    error = "OperationalError: ClickHouse does not answer"
    error_at = factory.LazyFunction(timezone.now)


class EndpointFactory(factory.django.DjangoModelFactory):
    """An endpoint at version 1, whose first version is kept as publishing keeps it."""

    class Meta:
        model = Endpoint
        skip_postgeneration_save = True

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"endpoint-{n}")
    query = factory.LazyFunction(lambda: {"kind": "HogQLQuery", "query": "SELECT count() FROM events"})
    parameters = factory.LazyFunction(lambda: {"type": "object"})

    @factory.post_generation
    def first_version(self, create, extracted, **kwargs):
        if create:
            EndpointVersion.objects.create(endpoint=self, version=1, query=self.query, parameters=self.parameters)
