from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apikeys.scopes import parse_scopes
from apikeys.services import clean_endpoint_names, project_key_create
from organizations.models import Project


class Command(BaseCommand):
    help = "Issue a secret key of project PROJECT_ID (not of a person); prints the key alone."

    def add_arguments(self, parser):
        parser.add_argument("project_id", type=int, metavar="PROJECT_ID")
        parser.add_argument("--scopes", required=True, help="Comma-separated, e.g. query:read,dashboard:read (no *)")
        parser.add_argument("--endpoints", default="", help="Comma-separated endpoint names; none: all endpoints")
        parser.add_argument("--label", default="Command-line key")

    def handle(self, *args, project_id, scopes, endpoints, label, **options):
        try:
            scope_list = parse_scopes(scopes, project=True)
            endpoint_names = clean_endpoint_names(name.strip() for name in endpoints.split(",") if name.strip())
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        project = Project.objects.filter(pk=project_id).first()
        if project is None:
            raise CommandError(f"Unknown project id: {project_id}")
        _, plaintext = project_key_create(
            actor=None, project=project, label=label, scopes=scope_list, endpoints=endpoint_names
        )
        self.stdout.write(plaintext)
