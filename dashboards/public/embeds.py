"""Signed embeds (DECISIONS.md §19): what a token a customer's server signed lets its viewer see.

A customer's server signs a JWT with one of the project's embed secrets (HS256, the secret's `kid` in the header):

    {"resource": {"dashboard": 12} | {"insight": 34},
     "locked": {"properties": [{"key": "$browser", "value": "Chrome"}], "date_from": "-30d", "date_to": null},
     "viewer_date_range": false,
     "exp": <unix time, at most 24 hours ahead>}

or, for an endpoint of the project (pipelines.endpoints) by its name, at a version or its latest:

    {"resource": {"endpoint": "by-country", "version": 2},
     "locked": {"parameters": {"country": "DE"}},
     "exp": ...}

`embed_from_token` checks it and returns the `Embed` it grants, or raises `EmbedRefused`, whatever the reason (not a
JWT, another algorithm or none, an unknown, rotated-out or deleted secret, a bad signature, expired, an expiry too far
ahead, claims of the wrong shape, a resource that is not the secret's project's, deleted, or an organization that
allows no public pages; for an endpoint also a name it no longer has, a version it never had, or a locked parameter
its schema does not have or whose value it refuses): the page answers one and the same 404 for each, so a token's
story is not told; the reason is logged (INFO) for whoever runs the service.

An endpoint's token locks parameters and nothing else: no properties, no dates, no viewer range (its query, and its
dates, are its publisher's contract; the viewer sets the parameters the token leaves open, within their schema:
dashboards.public.endpoint_pages).

The locked properties are event property filters, as a query's `properties` are; they are ANDed into every tile's
query, and the locked dates replace its range. Nothing the page's URL says can widen them: the only thing a viewer
may choose is a date range, where the token allows it: one of the relative ranges the page offers inside the locked
one, or the locked one itself; any other is snapped to the nearest of those (`viewer_range`).
"""

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import jwt
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dashboards.core.models import Dashboard, Insight
from dashboards.core.results import refresh_period_start
from dashboards.public.models import EmbedSecret
from dashboards.public.ranges import VIEWER_RANGES, range_start
from dashboards.public.services import embed_secret_value
from pipelines.endpoints.models import NAME_PATTERN, Endpoint, EndpointVersion
from pipelines.endpoints.parameters import ParameterError, validate_some
from pipelines.endpoints.services import endpoint_version
from pipelines.query.dates import ALL_SINCE, resolve
from pipelines.query.errors import QueryError
from pipelines.query.nodes import EventPropertyFilter
from workspace.api.exceptions import NotFoundError
from workspace.secrets import InvalidToken

logger = logging.getLogger(__name__)

ALGORITHM = "HS256"
# A token names its own end, no further than this ahead: a leaked link stops working within a day.
MAX_LIFETIME = dt.timedelta(hours=24)
# Clocks of the customer's server and this service may differ by this much.
CLOCK_SKEW = dt.timedelta(seconds=60)
# Longer tokens are refused unread (a URL this long is no token this service asks for).
MAX_TOKEN_LENGTH = 8192
MAX_LOCKED_PROPERTIES = 20
MAX_LOCKED_PARAMETERS = 50  # as many as an endpoint takes (pipelines.endpoints.parameters.MAX_PARAMETERS)
# Where a token lets its viewer pick a date range but locks no start, the viewer looks back at most this far.
VIEWER_MAX_LOOKBACK_DAYS = 90
# What `all` starts at when locked dates are checked: the earliest it ever starts (the query layer's `all` starts at the
# project's first event since then).
EARLIEST_EVENT = ALL_SINCE

LockedDate = Annotated[str, Field(min_length=1, max_length=64)]


class Locked(BaseModel):
    """What a token locks: of a dashboard or an insight, property filters ANDed into every query, and the dates in
    force (None: the tiles' own); of an endpoint, the values of some of its parameters. Which of these a token may
    say depends on its resource (`Claims`); each is None where not said."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    properties: list[EventPropertyFilter] | None = Field(default=None, max_length=MAX_LOCKED_PROPERTIES)
    date_from: LockedDate | None = None
    date_to: LockedDate | None = None
    # Values are checked against the endpoint's schema once it is found (`_endpoint`).
    parameters: dict[Annotated[str, Field(max_length=64)], Any] | None = Field(
        default=None, max_length=MAX_LOCKED_PARAMETERS
    )


ResourceId = Annotated[int, Field(gt=0, lt=2**63)]


class DashboardResource(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    dashboard: ResourceId


class InsightResource(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    insight: ResourceId


class EndpointResource(BaseModel):
    """An endpoint by its name, at `version` (None: its latest when the page is viewed)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    endpoint: Annotated[str, Field(pattern=NAME_PATTERN, max_length=128)]
    version: ResourceId | None = None


class Claims(BaseModel):
    """The claims of an embed token, as the module's docstring shows them. Strict: a number is no boolean, a string
    no number; claims a signer may add besides these (`iat`, `nbf`, ...) are ignored.

    Exactly one resource. A dashboard or an insight locks `properties` (required) and perhaps dates, never
    parameters; an endpoint locks `parameters` only (perhaps none), and lets its viewer pick no date range: its query
    and its dates are the publisher's, and what a viewer may change is the parameters the token leaves open."""

    model_config = ConfigDict(strict=True, frozen=True, allow_inf_nan=False)

    resource: DashboardResource | InsightResource | EndpointResource
    locked: Locked
    viewer_date_range: bool = False
    exp: float

    @model_validator(mode="after")
    def _locks_fit_the_resource(self):
        locked = self.locked
        if isinstance(self.resource, EndpointResource):
            if locked.properties is not None or locked.date_from is not None or locked.date_to is not None:
                raise ValueError("an endpoint locks parameters only")
            if self.viewer_date_range:
                raise ValueError("an endpoint's viewer picks parameters, not a date range")
        else:
            if locked.properties is None:
                raise ValueError("locked.properties is required")
            if locked.parameters is not None:
                raise ValueError("only an endpoint has parameters")
        return self


class EmbedRefused(Exception):
    """A token that grants nothing. Its message is for the logs only: the page says the same for every token."""


@dataclass(frozen=True)
class Embed:
    """What a verified token grants: one dashboard (its shown tiles) or one insight, of the secret's project, with
    `properties` ANDed into every query and `date_from` / `date_to` (when locked) in force; or one endpoint's version
    (`endpoint`, `published`: the Endpoint itself for its latest) run with the `parameters` it locks."""

    secret: EmbedSecret
    dashboard: Dashboard | None
    insight: Insight | None
    properties: list[dict]
    date_from: str | None
    date_to: str | None
    viewer_date_range: bool
    expires_at: dt.datetime
    endpoint: Endpoint | None = None
    published: Endpoint | EndpointVersion | None = None
    parameters: dict = field(default_factory=dict)

    @property
    def project(self):
        return self.secret.project

    @property
    def frame_ancestors(self) -> str:
        """The `frame-ancestors` sources of the page: the secret's allowed origins, or `'none'`."""
        return " ".join(self.secret.allowed_origins) or "'none'"


def embed_from_token(token: str, *, now: dt.datetime | None = None) -> Embed:
    """The embed `token` grants; EmbedRefused for any token that grants nothing (see the module's docstring)."""
    now = now or timezone.now()
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
        raise EmbedRefused("not a token")
    secret, key = _signing_key(token)
    try:
        claims = Claims.model_validate(
            jwt.decode(
                token,
                key=key,
                algorithms=[ALGORITHM],
                options={"require": ["exp"], "verify_aud": False, "verify_iss": False},
                leeway=0,
            )
        )
    except jwt.PyJWTError as error:
        raise EmbedRefused(f"signature or claims: {error}") from None
    except ValidationError as error:
        raise EmbedRefused(f"claims: {error.errors()[0]['loc']}") from None
    if claims.exp > (now + MAX_LIFETIME + CLOCK_SKEW).timestamp():  # PyJWT has checked that it is in the future
        raise EmbedRefused("exp too far ahead")
    if not secret.project.organization.allow_publicly_shared_resources:
        raise EmbedRefused("public pages are off")
    expires_at = dt.datetime.fromtimestamp(claims.exp, tz=dt.UTC)
    if isinstance(claims.resource, EndpointResource):
        return _endpoint_embed(secret, claims, expires_at)
    dashboard, insight = _resource(claims.resource, secret.project)
    embed = Embed(
        secret=secret,
        dashboard=dashboard,
        insight=insight,
        properties=[prop.model_dump(mode="json", exclude_none=True) for prop in claims.locked.properties],
        date_from=claims.locked.date_from,
        date_to=claims.locked.date_to,
        viewer_date_range=claims.viewer_date_range,
        expires_at=expires_at,
    )
    if embed.date_from is not None or embed.date_to is not None:
        try:
            locked_range(embed, now=now)
        except QueryError as error:
            raise EmbedRefused(f"locked dates: {error.detail}") from None
    return embed


def _signing_key(token: str) -> tuple[EmbedSecret, str]:
    """The secret the token's header names (`kid`), and its value to check the signature with."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as error:
        raise EmbedRefused(f"malformed: {error}") from None
    # Only HS256 is taken: never `none`, and never a public-key algorithm that would read the secret as a key.
    if header.get("alg") != ALGORITHM:
        raise EmbedRefused("algorithm")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid or len(kid) > 32:
        raise EmbedRefused("no kid")
    secret = EmbedSecret.objects.select_related("project__organization").filter(kid=kid).first()
    if secret is None:
        raise EmbedRefused("unknown kid")
    try:
        key = embed_secret_value(secret)
    except InvalidToken:
        # Encrypted with a key no longer in SECRETS_ENCRYPTION_KEYS (see `manage.py rotate_embed_secrets`).
        logger.error("Embed secret %s cannot be decrypted with SECRETS_ENCRYPTION_KEYS.", secret.kid)
        raise EmbedRefused("undecryptable secret") from None
    return secret, key


def embed_token(
    *,
    kid: str,
    secret: str,
    resource: dict,
    properties: list[dict] | None = None,
    parameters: dict | None = None,
    date_from: str | None = None,
    date_to: str | None = None,
    viewer_date_range: bool = False,
    expires_in: dt.timedelta = MAX_LIFETIME,
    now: dt.datetime | None = None,
) -> str:
    """A token as a customer's server signs one (what `manage.py embed_url` prints a link with): HS256 with the
    secret, its `kid` in the header. An endpoint's token locks `parameters`; a dashboard's or an insight's,
    `properties` (none: an empty list)."""
    locked = {"parameters": parameters or {}} if "endpoint" in resource else {"properties": properties or []}
    if date_from is not None:
        locked["date_from"] = date_from
    if date_to is not None:
        locked["date_to"] = date_to
    claims = {
        "resource": resource,
        "locked": locked,
        "viewer_date_range": viewer_date_range,
        "exp": int(((now or timezone.now()) + expires_in).timestamp()),
    }
    return jwt.encode(claims, secret, algorithm=ALGORITHM, headers={"kid": kid})


def _endpoint_embed(secret: EmbedSecret, claims: Claims, expires_at: dt.datetime) -> Embed:
    """The embed of the endpoint the claims name, in the secret's project, at the version they pin (else its
    latest), with the parameters they lock checked against that version's schema: a name the schema does not have,
    or a value outside its schema, grants nothing."""
    resource = claims.resource
    endpoint = Endpoint.objects.filter(project=secret.project, name=resource.endpoint).first()
    if endpoint is None:
        raise EmbedRefused("no such endpoint in the secret's project")
    endpoint.project = secret.project
    try:
        published = endpoint_version(endpoint, resource.version)
        locked = validate_some(published.parameters, claims.locked.parameters or {})
    except NotFoundError:
        raise EmbedRefused(f"endpoint {endpoint.name} has no version {resource.version}") from None
    except ParameterError as error:
        raise EmbedRefused(f"locked parameter {error.attr}: {error.detail}") from None
    return Embed(
        secret=secret,
        dashboard=None,
        insight=None,
        properties=[],
        date_from=None,
        date_to=None,
        viewer_date_range=False,
        expires_at=expires_at,
        endpoint=endpoint,
        published=published,
        parameters=locked,
    )


def _resource(resource: DashboardResource | InsightResource, project) -> tuple[Dashboard | None, Insight | None]:
    [(kind, pk)] = resource.model_dump().items()
    model = Dashboard if kind == "dashboard" else Insight
    found = model.objects.filter(project=project, deleted=False, pk=pk).first()
    if found is None:
        raise EmbedRefused(f"no such {kind} in the secret's project")
    found.project = project
    return (found, None) if kind == "dashboard" else (None, found)


@dataclass(frozen=True)
class ViewerRange:
    """The date range a page shows: `date_from` / `date_to` as the tiles' queries get them (None: the tile's own);
    whether a viewer chose it (`chosen`, their `requested` start), whether their choice was narrowed to fit inside
    what the token allows (`clamped`) and whether it was replaced by the nearest range the page offers
    (`snapped`)."""

    date_from: str | None
    date_to: str | None
    clamped: bool = False
    chosen: bool = False
    requested: str | None = None
    snapped: bool = False


def locked_range(embed: Embed, *, now: dt.datetime | None = None) -> tuple[dt.datetime, dt.datetime]:
    """The locked dates as moments in the project's time zone, `[start, end)`; where no start is locked, the
    VIEWER_MAX_LOOKBACK_DAYS days before the end. QueryError when they name no range."""
    tz = ZoneInfo(embed.project.time_zone)
    found = resolve(
        embed.date_from or "all",
        embed.date_to,
        explicit=True,
        tz=tz,
        now=now or timezone.now(),
        earliest=lambda: EARLIEST_EVENT,
        attr=lambda name: f"locked__{name}",
    )
    start, end = found.start.astimezone(tz), found.end.astimezone(tz)
    if embed.date_from is None or embed.date_from == "all":
        start = max(start, end - dt.timedelta(days=VIEWER_MAX_LOOKBACK_DAYS))
    return start, end


def viewer_range(embed: Embed, date_from: str | None, date_to: str | None, *, now: dt.datetime | None = None):
    """The range the page shows for a viewer who asked for `date_from` / `date_to` (the page's query parameters).

    Without the token's leave (`viewer_date_range`), or without a choice, the locked dates (or the tiles' own). With
    it, one of the ranges the page offers (`offered_ranges`: the relative ones that start inside the locked range, or
    where no start is locked inside the last VIEWER_MAX_LOOKBACK_DAYS days) or the locked range itself: the one whose
    start is nearest the viewer's (`snapped` when it is not the one asked for; `clamped` when it is the locked range
    in place of a wider one). Offered ranges end now, so a viewer's `date_to` is not read. A range that names no
    start is ignored.

    Times are those of the start of the current refresh period (`refresh_period_start`), so that a range the locked
    dates cut is the same query, and the same cached result, for every view of a period."""
    locked = ViewerRange(embed.date_from, embed.date_to)
    if not embed.viewer_date_range or not (date_from or date_to):
        return locked
    now = refresh_period_start(now)
    tz = ZoneInfo(embed.project.time_zone)
    requested = (date_from or "").strip()[:64]
    try:
        lowest, highest = locked_range(embed, now=now)
    except QueryError:
        return locked
    wanted = range_start(requested, tz=tz, now=now) if requested else None
    if wanted is None:
        return locked
    offered = offered_ranges(embed, now=now)
    starts = {value: range_start(value, tz=tz, now=now) for value in offered}
    picked = min(offered, key=lambda value: (abs(starts[value] - wanted), starts[value]), default=None)
    # The locked range itself, where its start is the nearest: narrowed to it (a wider range asked for) or snapped.
    own = ViewerRange(embed.date_from, embed.date_to, clamped=wanted < lowest, snapped=wanted >= lowest)
    if picked is None or abs(lowest - wanted) < abs(starts[picked] - wanted):
        return own
    snapped = picked != requested or bool(date_to)
    if now <= highest:
        return ViewerRange(picked, None, chosen=True, requested=picked, snapped=snapped)
    # The locked range ends before now: the offered range cut to end with it.
    start, end = max(starts[picked].astimezone(tz), lowest), highest
    if start >= end:
        return own
    return ViewerRange(_date_value(start), _date_value(end, is_end=True), clamped=True, chosen=True, requested=picked)


def offered_ranges(embed: Embed, *, now: dt.datetime | None = None) -> list[str]:
    """The relative ranges (dashboards.public.ranges.VIEWER_RANGES) the page offers: those that start inside the
    locked range."""
    return [value for value, _ in VIEWER_RANGES if within_locked(embed, value, now=now)]


def within_locked(embed: Embed, date_from: str, *, now: dt.datetime | None = None) -> bool:
    """Whether a viewer's range from `date_from` to now starts inside the locked range (a choice the page offers)."""
    now = now or timezone.now()
    tz = ZoneInfo(embed.project.time_zone)
    try:
        lowest, _ = locked_range(embed, now=now)
        start = resolve(date_from, None, explicit=True, tz=tz, now=now, earliest=lambda: EARLIEST_EVENT).start
    except QueryError:
        return False
    return start.astimezone(tz) >= lowest


def _date_value(moment: dt.datetime, *, is_end: bool = False) -> str:
    """A moment as a query's `date_from` / `date_to`: a local midnight as a plain date (as `date_to`, the day before,
    which a plain date includes whole), so that the query layer's widening to whole days adds nothing to it."""
    if moment.time() == dt.time(0):
        return (moment.date() - dt.timedelta(days=1 if is_end else 0)).isoformat()
    return moment.isoformat()
