"""The page of a signed embed, `/embed/<token>`: the shared page's rendering (dashboards.public.pages) of what the token
grants (dashboards.public.embeds), for whoever holds the link, no key; `?format=json` gives the same tiles' results
as JSON.

Every tile computes its effective query (dashboards.core.results): the dashboard's filters, then the token's locked
properties ANDed to its own and the locked dates (or a viewer's range inside them, where the token allows one: one
the page offers, any other snapped to the nearest) over its range, computed once per SHARED_PAGE_REFRESH_SECONDS for
every viewer and cached under that query. A tile whose kind takes no properties (HogQL) shows no result on a page
that locks anything, rather than more than the token grants. The page reads no query parameter but `format` and
`date_from` (a `date_to` only makes it say that the range shown is not the one asked for), so no URL widens what it
locks.

The JSON tells its freshness in HTTP (DECISIONS.md §21; pipelines.query.freshness): a weak `ETag` of the page's
numbers (the body without its tiles' cache state), `Age` and `Cache-Status` of its oldest result, `Cache-Control:
private, max-age=` the seconds until that one is older than SHARED_PAGE_REFRESH_SECONDS. `If-None-Match` with the tag
is a 304; while every tile's result is within its period nothing is computed for it. The request's `Cache-Control:
only-if-cached` computes nothing and answers from the cache (any age), or 504 when a tile has no result there;
`no-cache` changes nothing: the owner's period is the refresh throttle of public pages, whoever asks. While a tile is
being computed, the page has no ETag and is not to be kept.

Framing is what the secret allows: `Content-Security-Policy: frame-ancestors` names its allowed origins (none:
`'none'`), in place of the default policy's. Views count against the shared pages' rate per address, before the
token is read; every refused token gets the same 404.
"""

import datetime as dt
import json
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.conf import settings
from django.http import HttpResponseNotModified, JsonResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_http_methods

from dashboards.core.models import DashboardTile
from dashboards.core.results import (
    CACHE_ONLY,
    FILTERED_KINDS,
    RESULT_FIELDS,
    SHARED,
    WRAPPERS,
    DateOverride,
    InsightResults,
)
from dashboards.core.selectors import shown_tiles
from dashboards.public.embeds import Embed, EmbedRefused, ViewerRange, embed_from_token, offered_ranges, viewer_range
from dashboards.public.pages import json_response, page, page_context, page_response, refused_view
from dashboards.public.ranges import VIEWER_RANGES, PageRange, RangeChoice, stated_range
from pipelines.query import dates as query_dates
from pipelines.query.errors import QueryError
from pipelines.query.freshness import HIT, MISS, STALE, Freshness, combined
from workspace.api.conditional import cache_directives, etag_for, none_match

NOT_FOUND_PAGE = "dashboards/embed_not_found.html"
NOT_FOUND = {"type": "invalid_request", "code": "not_found", "detail": "Not found.", "attr": None}
UNLOCKABLE = "This tile's query cannot be limited to what the embed locks, so it is not shown here."
LONG_PERIODS = "This tile's periods start before the dates this page shows, so it is not shown here."
DEFAULT_RETENTION_PERIODS = 11  # a retention's totalIntervals when its query leaves it out
MAX_RETENTION_PERIODS = 30
CLAMPED = "This page shows no more than the dates its link allows, so it shows the part of your range inside them."
SNAPPED = "This page does not offer that date range, so it shows the nearest one it does."
NOT_CACHED = {
    "type": "invalid_request",
    "code": "not_cached",
    "detail": "Not every tile of this page has a cached result (only-if-cached).",
    "attr": None,
}
# What a tile's result says of its cache state rather than of its numbers, and the page's own: left out of its ETag.
TILE_CACHE_STATE = ("last_refresh", "next_allowed_client_refresh", "is_cached", "stale", "computing")


class EmbedResults(InsightResults):
    """The results an embed shows: each tile's effective query with the token's locks, and no result for a tile
    whose query cannot be held to them."""

    def __init__(self, embed: Embed, override: DateOverride | None, *, refresh: str = SHARED):
        super().__init__(
            project=embed.project,
            refresh=refresh,
            filters=embed.dashboard.filters if embed.dashboard is not None else None,
            extra_properties=embed.properties,
            dates=override,
        )
        self.locks = bool(embed.properties or override)

    def of(self, insight) -> dict:
        if self.locks and insight.query is not None and not lockable(insight.query):
            return self.refused(UNLOCKABLE)
        if insight.query is not None and self.query_of(insight) is None:
            return self.refused(LONG_PERIODS)
        return super().of(insight)

    def refused(self, reason: str) -> dict:
        shown = {**dict.fromkeys(RESULT_FIELDS), "is_cached": False, "error": reason, "resolved_date_range": None}
        return {**shown, "timezone": self.project.time_zone, "stale": False, "computing": False}

    def query_of(self, insight):
        """The tile's effective query; a retention's periods kept to those that start inside the dates in force
        (the query layer counts them back from the range's end, whatever its start), None when none does."""
        query = super().query_of(insight)
        if self.dates is None or not self.dates.date_from:
            return query
        source = query
        while isinstance(source, dict) and source.get("kind") in WRAPPERS:
            source = source.get("source")
        if not isinstance(source, dict) or source.get("kind") != "RetentionQuery":
            return query
        periods = retention_periods_within(source, self.dates, self.project)
        if periods is None:
            return query  # a range the query layer will refuse, naming it
        if periods == 0:
            return None
        retention = source.setdefault("retentionFilter", {})
        if isinstance(retention, dict):
            total = retention.get("totalIntervals")
            total = total if isinstance(total, int) and not isinstance(total, bool) else DEFAULT_RETENTION_PERIODS
            retention["totalIntervals"] = min(total, periods)
        return query


def retention_periods_within(source: dict, dates: DateOverride, project) -> int | None:
    """How many of a retention's periods (`Day`, `Week` from Sunday, `Month`), counted back from the one that holds
    the range's end, start no earlier than the range's start; None when the dates name no range."""
    retention = source.get("retentionFilter") if isinstance(source.get("retentionFilter"), dict) else {}
    unit = {"Day": "day", "Week": "week", "Month": "month"}.get(retention.get("period") or "Day", "day")
    tz = ZoneInfo(project.time_zone)
    try:
        resolved = query_dates.resolve(dates.date_from, dates.date_to, tz=tz, now=timezone.now())
    except QueryError:
        return None
    start = resolved.start.astimezone(tz)
    period = query_dates.start_of(unit, (resolved.end - dt.timedelta(microseconds=1)).astimezone(tz))
    count = 0
    while period >= start and count < MAX_RETENTION_PERIODS:
        count += 1
        day = period.date()
        day = (
            query_dates.add_months(day, -1) if unit == "month" else day - dt.timedelta(days=7 if unit == "week" else 1)
        )
        period = query_dates.local_midnight(day, tz)
    return count


def lockable(query) -> bool:
    """Whether the query takes the properties and dates an embed locks (the kinds the effective query changes)."""
    while isinstance(query, dict) and query.get("kind") in WRAPPERS:
        query = query.get("source")
    return isinstance(query, dict) and query.get("kind") in FILTERED_KINDS


@require_http_methods(["GET", "HEAD"])
@xframe_options_exempt  # the Content-Security-Policy's frame-ancestors decides who may frame it
def embedded_page(request, token: str):
    """The embed's tiles, as HTML or (`?format=json`) JSON; 404 for a token that grants nothing, 429 over the rate.
    Only the JSON's results may be kept (private, for their time to live): every other answer is never to be kept."""
    response = embedded_response(request, token)
    if not response.has_header("Cache-Status"):
        add_never_cache_headers(response)
    return response


def embedded_response(request, token: str):
    as_json = request.GET.get("format") == "json"
    refusal = refused_view(request)
    if refusal is not None:
        return throttled(request, refusal.wait, as_json=as_json)
    try:
        embed = embed_from_token(token)
    except EmbedRefused:
        return not_found(request, as_json=as_json)
    wanted = viewer_range(embed, request.GET.get("date_from"), request.GET.get("date_to"))
    override = DateOverride(wanted.date_from, wanted.date_to) if wanted.date_from or wanted.date_to else None
    shown = embed_range(embed, wanted, override)
    only_if_cached = as_json and "only-if-cached" in cache_directives(request)
    results = EmbedResults(embed, override, refresh=CACHE_ONLY if only_if_cached else SHARED)
    resource = embed.dashboard or embed.insight
    tiles = embed_tiles(embed)
    if as_json:
        response = json_response(resource, tiles, results, shown, first=embed_fields(embed))
        body = json.loads(response.content)
        if only_if_cached and any(not_cached(tile) for tile in body["tiles"]):
            response = json_page_headers(NOT_CACHED, status=504)
            response["Cache-Status"] = "workspace; detail=not-stored"
            add_never_cache_headers(response)
        else:
            freshness = json_freshness(body)
            if freshness is not None:
                headers = freshness.headers(timezone.now())
                header = request.headers.get("If-None-Match")
                if "ETag" in headers and header is not None and none_match(header, headers["ETag"]):
                    response = HttpResponseNotModified()
                for name, value in headers.items():
                    response[name] = value
        allow_origin(request, response, embed)
        return response
    context = page_context(request, resource, tiles, results, shown)
    if not embed.viewer_date_range:
        context["numbers_href"] = "?format=json"  # the page's numbers, without a range the token does not allow
    response = page_response(request, context)
    response["Content-Security-Policy"] = framed_policy(embed)
    return response


def json_freshness(body: dict) -> Freshness | None:
    """The freshness of the JSON page `body`: its tiles' results together (pipelines.query.freshness.combined), fresh
    for SHARED_PAGE_REFRESH_SECONDS each, with the ETag of the body without its cache state. None while a tile is
    being computed: the page changes as soon as it is."""
    if body.get("computing"):
        return None
    fresh_for = dt.timedelta(seconds=settings.SHARED_PAGE_REFRESH_SECONDS)
    parts = []
    for tile in body["tiles"]:
        shown = tile.get("insight")
        if not shown or shown.get("last_refresh") is None:
            continue
        state = STALE if shown.get("stale") else HIT if shown.get("is_cached") else MISS
        computed_at = dt.datetime.fromisoformat(shown["last_refresh"])
        parts.append(Freshness(state=state, etag=None, computed_at=computed_at, fresh_for=fresh_for))
    numbers = {
        **{name: value for name, value in body.items() if name not in ("tiles", "computing")},
        "tiles": [
            {**tile, "insight": {k: v for k, v in tile["insight"].items() if k not in TILE_CACHE_STATE}}
            if tile.get("insight")
            else tile
            for tile in body["tiles"]
        ],
    }
    return combined(parts, etag="W/" + etag_for(numbers), fresh_for=fresh_for)


def not_cached(tile: dict) -> bool:
    """Whether a tile of the JSON page is an insight that has no result because none is cached (not one refused)."""
    shown = tile.get("insight")
    return bool(shown) and shown.get("error") is None and shown.get("last_refresh") is None


def embed_range(embed: Embed, wanted: ViewerRange, override: DateOverride | None) -> PageRange:
    """How the page states its range, with the ranges a viewer may pick (those inside the locked ones) where the
    token lets them."""
    filters = embed.dashboard.filters if embed.dashboard is not None else None
    choices = ()
    if embed.viewer_date_range:
        chosen = wanted.requested if wanted.chosen else None
        offered = offered_ranges(embed)
        choices = (
            RangeChoice(label="The page's own range", href="?", current=not wanted.chosen),
            *(
                RangeChoice(label=label, href="?" + urlencode({"date_from": value}), current=value == chosen)
                for value, label in VIEWER_RANGES
                if value in offered
            ),
        )
    return stated_range(
        project=embed.project,
        filters=filters,
        override=override,
        note=CLAMPED if wanted.clamped else SNAPPED if wanted.snapped else "",
        choices=choices,
        chosen=wanted.requested if wanted.chosen else None,
    )


def embed_tiles(embed: Embed) -> list[DashboardTile]:
    """The tiles the embed shows: the dashboard's shown tiles in order, or one tile of the insight."""
    if embed.dashboard is None:
        return [DashboardTile(insight=embed.insight, layouts={})]
    tiles = list(shown_tiles().filter(dashboard=embed.dashboard).select_related("insight", "text"))
    for tile in tiles:
        if tile.insight_id:
            tile.insight.project = embed.project
    return tiles


def embed_fields(embed: Embed) -> dict:
    """What the JSON of the page says first: what the token grants (the resource, what it locks and until when)."""
    resource = {"dashboard": embed.dashboard.pk} if embed.dashboard is not None else {"insight": embed.insight.pk}
    locked = {"properties": embed.properties, "date_from": embed.date_from, "date_to": embed.date_to}
    return {"resource": resource, "locked": locked, "expires_at": embed.expires_at.isoformat()}


def allow_origin(request, response, embed: Embed) -> None:
    """A page of an allowed origin may read the JSON from its own script (CORS), and no other."""
    origin = request.headers.get("Origin", "").lower()
    response["Vary"] = "Origin"
    if origin and origin in embed.secret.allowed_origins:
        response["Access-Control-Allow-Origin"] = origin


def framed_policy(embed: Embed) -> str:
    """The HTML pages' Content-Security-Policy with `frame-ancestors` set to the secret's allowed origins."""
    directives = [
        directive.strip()
        for directive in settings.CONTENT_SECURITY_POLICY_HTML.split(";")
        if directive.strip() and directive.split()[0] != "frame-ancestors"
    ]
    return "; ".join([*directives, f"frame-ancestors {embed.frame_ancestors}"])


def not_found(request, *, as_json: bool):
    """The one answer to every token that grants nothing."""
    if as_json:
        return json_page_headers(NOT_FOUND, status=404)
    return page(request, NOT_FOUND_PAGE, {}, status=404)


def throttled(request, wait: float | None, *, as_json: bool):
    if as_json:
        body = {
            "type": "throttled_error",
            "code": "throttled",
            "detail": "Too many views; try again soon.",
            "attr": None,
        }
        response = json_page_headers(body, status=429)
    else:
        response = page(request, NOT_FOUND_PAGE, {"throttled": True}, status=429)
    response["Retry-After"] = str(int(wait or 1))
    return response


def json_page_headers(body: dict, *, status: int):
    response = JsonResponse(body, status=status)
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response
