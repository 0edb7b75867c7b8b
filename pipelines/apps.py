from django.apps import AppConfig
from django.conf import settings
from django.core.signals import request_started
from django.db.models.signals import post_migrate


class PipelinesConfig(AppConfig):
    name = "pipelines"

    def ready(self):
        from pipelines.batch_exports import schema  # noqa: F401  registers the OpenAPI extension of the destination
        from pipelines.events import signals

        post_migrate.connect(signals.create_event_partitions_after_migrate, sender=self)
        if settings.CLICKHOUSE_URL and settings.EVENTS_SYNC_IN_SERVER:
            from pipelines.clickhouse.sync import start_in_server

            # At the first request, so that only a process that serves runs it (not runserver's reloader, nor a
            # command, nor gunicorn's master before it forks).
            request_started.connect(start_in_server, dispatch_uid="events-sync-in-server")
        if settings.TEMPORAL_ADDRESS and settings.BATCH_EXPORT_WORKER_IN_SERVER:
            from pipelines.batch_exports.temporal.worker import start_in_server as start_worker

            request_started.connect(start_worker, dispatch_uid="batch-export-worker-in-server")
