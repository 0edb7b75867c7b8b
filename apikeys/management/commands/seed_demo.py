import importlib
import os
import secrets
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from apikeys.models import PersonalAPIKey
from apikeys.scopes import ALL
from apikeys.services import api_key_create, hash_key
from organizations.models import Organization
from organizations.services import organization_create
from workspace.models import User

DEMO_EMAIL = "admin@example.com"
DEMO_ORGANIZATION = "Demo organization"
DEMO_KEY_LABEL = "Demo key"
# The demo key expires: a forgotten development database keeps no key that works for ever.
DEMO_KEY_DAYS = 30


def stored_demo_key(user, path: Path) -> tuple[str, PersonalAPIKey] | None:
    """The key kept in `path` when it is still the user's active all-scopes demo key."""
    try:
        plaintext = path.read_text().strip()
    except OSError:
        return None
    key = PersonalAPIKey.objects.filter(secure_value=hash_key(plaintext), user=user).first() if plaintext else None
    if key is None or not key.is_active or key.scopes != [ALL]:
        return None
    return plaintext, key


def keep_secret(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text + "\n")
    os.chmod(path, 0o600)  # a file that existed keeps its mode through os.open


class Command(BaseCommand):
    help = "Create (once) a demo admin, organization and project, and print the demo API key (reused while valid)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="Migrate the database first, in this process: `make run` starts the service once instead of twice.",
        )

    def handle(self, *args, migrate=False, **options):
        if migrate:
            call_command(
                "migrate", interactive=False, verbosity=options["verbosity"], stdout=self.stdout, stderr=self.stderr
            )
        key_file = Path(settings.DEMO_KEY_FILE)
        with transaction.atomic():
            user = User.objects.filter(email=DEMO_EMAIL).first()
            password = None
            if user is None:
                password = secrets.token_urlsafe(12)
                user = User.objects.create_superuser(DEMO_EMAIL, password, first_name="Demo", last_name="Admin")
            organization = Organization.objects.filter(name=DEMO_ORGANIZATION, memberships__user=user).first()
            if organization is None:
                organization = organization_create(actor=user, name=DEMO_ORGANIZATION)
                project = organization.projects.order_by("id").first()
                # Each app may add demo records through `<app>.demo.create_demo_data`.
                for app_config in apps.get_app_configs():
                    spec = importlib.util.find_spec(f"{app_config.name}.demo")
                    if spec is not None:
                        module = importlib.import_module(f"{app_config.name}.demo")
                        module.create_demo_data(user=user, organization=organization, project=project)
            project = organization.projects.order_by("id").first()
            stored = stored_demo_key(user, key_file)
            if stored is None:
                key, plaintext = api_key_create(
                    user=user, label=DEMO_KEY_LABEL, scopes=[ALL], expires_in_days=DEMO_KEY_DAYS
                )
            else:
                plaintext, key = stored
        if stored is None:
            keep_secret(key_file, plaintext)

        site = settings.SITE_URL.rstrip("/")
        self.stdout.write(f"Admin:        {site}/admin/  {DEMO_EMAIL}")
        if password:
            self.stdout.write(f"Password:     {password}  (shown once; change it in admin)")
        else:
            self.stdout.write("Password:     set on the first run (reset with `manage.py changepassword`)")
        if settings.TEMPORAL_UI_URL:
            ui = f"{settings.TEMPORAL_UI_URL}/namespaces/{settings.TEMPORAL_NAMESPACE}"
            self.stdout.write(f"Temporal UI:  {ui}/schedules  (batch export schedules and runs)")
        self.stdout.write(f"API docs:     {site}/api/docs/")
        self.stdout.write(f"API:          {site}/api")
        self.stdout.write(f"Organization: {organization.id}")
        self.stdout.write(f"Project:      {project.id}  (token for sending events: {project.api_token})")
        # Each app may print lines about its demo records through `<app>.demo.demo_lines` (links to open).
        for app_config in apps.get_app_configs():
            if importlib.util.find_spec(f"{app_config.name}.demo") is not None:
                module = importlib.import_module(f"{app_config.name}.demo")
                for line in getattr(module, "demo_lines", lambda **_: [])(project=project):
                    self.stdout.write(line)
        state = "new" if stored is None else "the same as last time"
        self.stdout.write(f"Demo API key ({state}; all scopes; expires {key.expires_at:%Y-%m-%d}; kept in {key_file}):")
        self.stdout.write(plaintext)
