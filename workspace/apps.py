from django.apps import AppConfig
from django.db.backends.signals import connection_created


class WorkspaceConfig(AppConfig):
    name = "workspace"

    def ready(self):
        # Registers the OpenAPI extension for the API key authentication class.
        from workspace.api import schema  # noqa: F401
        from workspace.db import watch_connection

        connection_created.connect(watch_connection, dispatch_uid="workspace.db.watch_connection")
