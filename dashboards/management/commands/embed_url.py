import datetime as dt
import json

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from pydantic import ValidationError as PydanticValidationError

from dashboards.core.models import Dashboard, Insight
from dashboards.public.embeds import MAX_LIFETIME, EmbedRefused, embed_from_token, embed_token
from dashboards.public.models import EmbedSecret
from dashboards.public.serializers import EmbedSecretSerializer
from dashboards.public.services import embed_secret_create, embed_secret_value
from pipelines.endpoints.models import Endpoint
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


def parameter(text: str) -> tuple[str, object]:
    """`NAME=VALUE` as a locked parameter: the value as JSON where it reads as JSON (`5`, `true`), else as text."""
    name, separator, value = text.partition("=")
    if not separator or not name:
        raise CommandError(f"--parameter {text!r}: use NAME=VALUE, e.g. --parameter country=DE.")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


class Command(BaseCommand):
    help = (
        "Print a signed /embed/ link to a dashboard or an insight with properties locked, or to an endpoint with "
        "parameters locked, signed as a customer's server would sign it (with one of the project's embed secrets)."
    )

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--dashboard", type=int, metavar="ID", help="The dashboard to embed.")
        target.add_argument("--insight", type=int, metavar="ID", help="The insight to embed.")
        target.add_argument("--endpoint", metavar="NAME", help="The endpoint to embed (with --project).")
        parser.add_argument("--project", type=int, metavar="ID", help="The endpoint's project.")
        parser.add_argument(
            "--endpoint-version",
            type=int,
            metavar="N",
            help="Pin the endpoint's version (default: its latest when viewed).",
        )
        parser.add_argument(
            "--parameter",
            action="append",
            default=[],
            dest="parameters",
            metavar="NAME=VALUE",
            help="Lock an endpoint's parameter (repeatable): VALUE as JSON where it reads as JSON (5, true), else "
            "as text (DE).",
        )
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

    def handle(self, *args, dashboard, insight, endpoint, properties, properties_json, secret, **options):
        hours = options["expires_in_hours"]
        if not 0 < hours <= MAX_LIFETIME.total_seconds() / 3600:
            raise CommandError("--expires-in-hours must be more than 0 and at most 24.")
        if endpoint is not None:
            self.endpoint_url(endpoint, properties + properties_json, secret, hours, options)
            return
        if options["parameters"] or options["endpoint_version"] is not None:
            raise CommandError("--parameter and --endpoint-version are for an --endpoint.")
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
        self.print_link(embed_secret, token)

    def endpoint_url(self, name: str, properties: list[str], secret: str | None, hours: float, options: dict):
        """A link to the endpoint `name` of `--project`, with the `--parameter`s locked."""
        if properties or options["date_from"] or options["date_to"] or options["viewer_date_range"]:
            raise CommandError("An endpoint's link locks parameters only (--parameter NAME=VALUE).")
        if options["project"] is None:
            raise CommandError("--endpoint needs --project: an endpoint's name is its project's.")
        found = Endpoint.objects.filter(project_id=options["project"], name=name).select_related("project").first()
        if found is None:
            raise CommandError(f"Project {options['project']} has no endpoint {name!r}.")
        parameters = dict(parameter(text) for text in options["parameters"])
        resource = {"endpoint": name}
        if options["endpoint_version"] is not None:
            resource["version"] = options["endpoint_version"]
        embed_secret = self.signing_secret(found.project, secret)
        token = embed_token(
            kid=embed_secret.kid,
            secret=embed_secret_value(embed_secret),
            resource=resource,
            parameters=parameters,
            expires_in=dt.timedelta(hours=hours),
        )
        try:
            embed_from_token(token)
        except EmbedRefused as refusal:  # the page would be the one 404: say why here
            raise CommandError(f"The link would show nothing: {refusal}.") from None
        self.print_link(embed_secret, token)

    def print_link(self, embed_secret: EmbedSecret, token: str) -> None:
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
