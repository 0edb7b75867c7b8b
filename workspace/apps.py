from django.apps import AppConfig
from django.core.signals import request_started
from django.db.backends.signals import connection_created


class WorkspaceConfig(AppConfig):
    name = "workspace"

    def ready(self):
        # Registers the OpenAPI extension for the API key authentication class.
        from workspace.api import schema  # noqa: F401
        from workspace.db import drop_dead_connections, watch_connection

        connection_created.connect(watch_connection, dispatch_uid="workspace.db.watch_connection")
        request_started.connect(drop_dead_connections, dispatch_uid="workspace.db.drop_dead_connections")
