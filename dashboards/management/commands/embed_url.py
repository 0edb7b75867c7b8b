import datetime as dt
import json

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from pydantic import ValidationError as PydanticValidationError

from dashboards.core.models import Dashboard, Insight
from dashboards.public.embeds import MAX_LIFETIME, embed_token
from dashboards.public.models import EmbedSecret
from dashboards.public.serializers import EmbedSecretSerializer
from dashboards.public.services import embed_secret_create, embed_secret_value
from pipelines.query.nodes import EventPropertyFilter
from workspace.services import activity_log_record, secret_mask

COMMAND_SECRET_NAME = "embed_url command"


def property_filter(text: str) -> dict:
    """`KEY=VALUE` (equals) or `KEY!=VALUE` (does not equal) as an event property filter."""
    operator = "is_not" if "!=" in text else "exact"
    key, separator, value = text.partition("!=" if operator == "is_not" else "=")
    if not separator or not key:
        raise CommandError(f"--property {text!r}: use KEY=VALUE or KEY!=VALUE, e.g. --property '$browser=Chrome'.")
    return {"key": key, "value": value, "operator": operator, "type": "event"}


def property_json(text: str) -> dict:
    try:
        return EventPropertyFilter.model_validate(json.loads(text)).model_dump(mode="json", exclude_none=True)
    except (ValueError, PydanticValidationError) as error:
        raise CommandError(f"--property-json {text!r} is not an event property filter: {error}") from None


class Command(BaseCommand):
    help = (
        "Print a signed /embed/ link to a dashboard or an insight with properties locked, signed as a customer's "
        "server would sign it (with one of the project's embed secrets)."
    )

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--dashboard", type=int, metavar="ID", help="The dashboard to embed.")
        target.add_argument("--insight", type=int, metavar="ID", help="The insight to embed.")
        parser.add_argument(
            "--property",
            action="append",
            default=[],
            dest="properties",
            metavar="KEY=VALUE",
            help="Lock an event property: KEY=VALUE or KEY!=VALUE (repeatable; all of them hold).",
        )
        parser.add_argument(
            "--property-json",
            action="append",
            default=[],
            dest="properties_json",
            metavar="FILTER",
            help='Lock any event property filter, e.g. \'{"key": "price", "operator": "gt", "value": 10}\'.',
        )
        parser.add_argument(
            "--date-from", help="Lock the start of the range, e.g. --date-from=-30d or --date-from 2026-01-01."
        )
        parser.add_argument("--date-to", help="Lock the end of the range.")
        parser.add_argument(
            "--viewer-date-range", action="store_true", help="Let viewers pick a range inside the locked one."
        )
        parser.add_argument(
            "--expires-in-hours", type=float, default=24, help="How long the link works (at most 24, the default)."
        )
        parser.add_argument(
            "--secret", metavar="KID", help="The embed secret to sign with (default: the project's newest)."
        )

    def handle(self, *args, dashboard, insight, properties, properties_json, secret, **options):
        hours = options["expires_in_hours"]
        if not 0 < hours <= MAX_LIFETIME.total_seconds() / 3600:
            raise CommandError("--expires-in-hours must be more than 0 and at most 24.")
        if dashboard is not None:
            found = Dashboard.objects.filter(pk=dashboard, deleted=False).select_related("project").first()
            resource = {"dashboard": dashboard}
        else:
            found = Insight.objects.filter(pk=insight, deleted=False).select_related("project").first()
            resource = {"insight": insight}
        if found is None:
            raise CommandError(f"No {next(iter(resource))} {next(iter(resource.values()))}.")
        project = found.project
        locked = [property_filter(text) for text in properties] + [property_json(text) for text in properties_json]

        embed_secret = self.signing_secret(project, secret)
        token = embed_token(
            kid=embed_secret.kid,
            secret=embed_secret_value(embed_secret),
            resource=resource,
            properties=locked,
            date_from=options["date_from"],
            date_to=options["date_to"],
            viewer_date_range=options["viewer_date_range"],
            expires_in=dt.timedelta(hours=hours),
        )
        origins = ", ".join(embed_secret.allowed_origins) or "none"
        self.stdout.write(f"Signed with {embed_secret.kid} ({embed_secret.name}; may be framed by: {origins}).")
        self.stdout.write(f"{settings.SITE_URL.rstrip('/')}/embed/{token}")

    def signing_secret(self, project, kid: str | None) -> EmbedSecret:
        secrets = project.embed_secrets.order_by("-created_at", "-id")
        if kid is not None:
            found = secrets.filter(kid=kid).first()
            if found is None:
                raise CommandError(f"The project has no embed secret {kid}.")
            return found
        found = secrets.first()
        if found is not None:
            return found
        try:
            found, _ = embed_secret_create(actor=None, project=project, name=COMMAND_SECRET_NAME)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        activity_log_record(
            user=None,
            api_key=None,
            scope="EmbedSecret",
            item_id=found.pk,
            activity="created",
            organization_id=project.organization_id,
            project_id=project.pk,
            name=found.name,
            after={**EmbedSecretSerializer(found).data, "secret": secret_mask(found.secret_encrypted)},
        )
        self.stdout.write(f"Created the embed secret {found.kid} ({found.name}): the project had none.")
        return found
