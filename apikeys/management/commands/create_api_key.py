import uuid

from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apikeys.scopes import parse_scopes
from apikeys.services import api_key_create
from workspace.models import User


class Command(BaseCommand):
    help = "Issue a personal API key for EMAIL (creating the user if needed); prints the key on the last line."

    def add_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--scopes", required=True, help="Comma-separated, e.g. dashboard:read,plugin:write or *")
        parser.add_argument("--label", default="Command-line key")
        parser.add_argument(
            "--organization",
            action="append",
            default=[],
            dest="organizations",
            metavar="ORG_ID",
            help="Limit the key to this organization (repeatable).",
        )
        parser.add_argument("--expires-in-days", type=int, default=None)

    def handle(self, *args, email, scopes, label, organizations, expires_in_days, **options):
        try:
            scope_list = parse_scopes(scopes)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        if expires_in_days is not None and expires_in_days < 1:
            raise CommandError("--expires-in-days must be at least 1.")
        organizations = _organization_ids(organizations)

        user = User.objects.filter(email__iexact=email).first()
        if user is None:
            user = User.objects.create_user(email)
            self.stdout.write(f"Created user {user.email}.")
        key, plaintext = api_key_create(
            user=user,
            label=label,
            scopes=scope_list,
            scoped_organizations=organizations,
            expires_in_days=expires_in_days,
        )
        self.stdout.write(f"Issued key {key.mask_value} for {user.email} with scopes {', '.join(key.scopes)}.")
        self.stdout.write(plaintext)


def _organization_ids(values: list[str]) -> list[str]:
    """Normalise the ids and refuse any that is not an existing organization."""
    ids = []
    for value in values:
        try:
            ids.append(str(uuid.UUID(value)))
        except ValueError as error:
            raise CommandError(f"'{value}' is not an organization id.") from error
    # Organizations sit above keys: looked up by name, not imported.
    organization_model = apps.get_model("organizations", "Organization")
    known = {str(pk) for pk in organization_model.objects.filter(id__in=ids).values_list("id", flat=True)}
    unknown = [org_id for org_id in ids if org_id not in known]
    if unknown:
        raise CommandError(f"Unknown organization id(s): {', '.join(unknown)}")
    return ids
