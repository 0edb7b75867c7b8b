from django.apps import AppConfig


class OrganizationsConfig(AppConfig):
    name = "organizations"
