from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PipelinesConfig(AppConfig):
    name = "pipelines"

    def ready(self):
        from pipelines.batch_exports import schema  # noqa: F401  registers the OpenAPI extension of the destination
        from pipelines.events import signals

        post_migrate.connect(signals.create_event_partitions_after_migrate, sender=self)
