from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    name = "workspace"

    def ready(self):
        # Registers the OpenAPI extension for the API key authentication class.
        from workspace.api import schema  # noqa: F401
