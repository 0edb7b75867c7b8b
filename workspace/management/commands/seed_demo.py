import importlib
import secrets

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import transaction

from apikeys.scopes import ALL
from apikeys.services import api_key_create
from organizations.models import Organization
from organizations.services import organization_create
from workspace.models import User

DEMO_EMAIL = "admin@example.com"
DEMO_ORGANIZATION = "Demo organization"


class Command(BaseCommand):
    help = "Create (once) a demo admin, organization and project, and print a new demo API key."

    def handle(self, *args, **options):
        with transaction.atomic():
            user = User.objects.filter(email=DEMO_EMAIL).first()
            password = None
            if user is None:
                password = secrets.token_urlsafe(12)
                user = User.objects.create_superuser(DEMO_EMAIL, password, first_name="Demo", last_name="Admin")
            organization = Organization.objects.filter(name=DEMO_ORGANIZATION, memberships__user=user).first()
            if organization is None:
                organization = organization_create(user=user, name=DEMO_ORGANIZATION)
                project = organization.projects.order_by("id").first()
                # Each app may add demo records through `<app>.demo.create_demo_data`.
                for app_config in apps.get_app_configs():
                    spec = importlib.util.find_spec(f"{app_config.name}.demo")
                    if spec is not None:
                        module = importlib.import_module(f"{app_config.name}.demo")
                        module.create_demo_data(user=user, organization=organization, project=project)
            project = organization.projects.order_by("id").first()
            _, plaintext = api_key_create(user=user, label="Demo key", scopes=[ALL])

        self.stdout.write(f"Admin:        http://127.0.0.1:8000/admin/  {DEMO_EMAIL}")
        if password:
            self.stdout.write(f"Password:     {password}  (shown once; change it in admin)")
        else:
            self.stdout.write("Password:     set on the first run (reset with `manage.py changepassword`)")
        self.stdout.write(f"Organization: {organization.id}")
        self.stdout.write(f"Project:      {project.id}")
        self.stdout.write("Demo API key (all scopes):")
        self.stdout.write(plaintext)
