"""The page of a signed embed, `/embed/<token>`: the shared page's rendering (dashboards.public.pages) of what the token
grants (dashboards.public.embeds), for whoever holds the link, no key; `?format=json` gives the same tiles' results
as JSON.

Every tile computes its effective query (dashboards.core.results): the dashboard's filters, then the token's locked
properties ANDed to its own and the locked dates (or a viewer's range inside them, where the token allows one: one
the page offers, any other snapped to the nearest) over its range, computed once per SHARED_PAGE_REFRESH_SECONDS for
every viewer and cached under that query. A tile whose kind takes no properties (HogQL) shows no result on a page
that locks anything, rather than more than the token grants, and says why. The page states what it locks under its
title ("Only: $browser = Chrome"). It reads no query parameter but `format` and `date_from` (a `date_to` only makes it
say that the range shown is not the one asked for), so no URL widens what it locks.

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

import dataclasses
import datetime as dt
import json
import logging
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponseNotModified
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from dashboards.core.models import DashboardTile
from dashboards.core.results import CACHE_ONLY, FILTERED_KINDS, SHARED, WRAPPERS, DateOverride
from dashboards.core.selectors import shown_tiles
from dashboards.public.charts import Chart
from dashboards.public.embed_headers import allow_origin, framed_policy, json_page_headers
from dashboards.public.embeds import (
    Embed,
    EmbedRefused,
    ViewerRange,
    embed_from_token,
    offered_ranges,
    viewer_range,
)
from dashboards.public.endpoint_pages import endpoint_response
from dashboards.public.pages import json_response, page, page_context, page_response, refused_view
from dashboards.public.ranges import VIEWER_RANGES, PageRange, RangeChoice, stated_range
from dashboards.public.results import PageResults
from pipelines.query.freshness import HIT, MISS, STALE, Freshness, combined
from workspace.api.conditional import cache_directives, etag_for, none_match

logger = logging.getLogger(__name__)

NOT_FOUND_PAGE = "dashboards/embed_not_found.html"
NOT_FOUND = {"type": "invalid_request", "code": "not_found", "detail": "Not found.", "attr": None}
UNLOCKABLE = "A {kind} cannot be limited to {locked}, so this tile shows no number here."
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
# How the page states a locked property's operator: `$browser = Chrome`, `price ≥ 10`, `email is set`.
OPERATOR_WORDS = {
    "exact": "=",
    "is_not": "≠",
    "icontains": "contains",
    "not_icontains": "does not contain",
    "regex": "matches",
    "not_regex": "does not match",
    "gt": ">",
    "gte": "≥",
    "lt": "<",
    "lte": "≤",
    "is_set": "is set",
    "is_not_set": "is not set",
}


class EmbedResults(PageResults):
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
        self.locked = locked_text(embed.properties) or "the dates this page shows"

    def of(self, insight) -> dict:
        if self.locks and insight.query is not None and not lockable(insight.query):
            return self.refused(insight, UNLOCKABLE.format(kind=kind_text(insight.query), locked=self.locked))
        return super().of(insight)


def lockable(query) -> bool:
    """Whether the query takes the properties and dates an embed locks (the kinds the effective query changes)."""
    return _source(query).get("kind") in FILTERED_KINDS


def _source(query) -> dict:
    while isinstance(query, dict) and query.get("kind") in WRAPPERS:
        query = query.get("source")
    return query if isinstance(query, dict) else {}


def kind_text(query) -> str:
    """The query's kind as a sentence names it: `HogQL query`, `EventsQuery query` for a kind without a word."""
    kind = _source(query).get("kind")
    if kind == "HogQLQuery":
        return "HogQL query"
    return f"{kind} query" if isinstance(kind, str) and kind else "query of this kind"


def locked_text(properties: list[dict]) -> str:
    """The locked properties as people read them, ANDed: `$browser = Chrome and plan ≠ free`; empty for none. A list
    value is any of its values (`$browser = Chrome or Safari`)."""
    parts = []
    for prop in properties:
        operator = prop.get("operator") or "exact"
        words = OPERATOR_WORDS.get(operator, operator)
        if operator in ("is_set", "is_not_set"):
            parts.append(f"{prop['key']} {words}")
            continue
        value = prop.get("value")
        values = value if isinstance(value, list) else [value]
        joiner = " and " if operator in ("is_not", "not_icontains", "not_regex") else " or "
        parts.append(f"{prop['key']} {words} {joiner.join(_value_text(item) for item in values)}")
    return " and ".join(parts)


def locked_statement(properties: list[dict]) -> str:
    """What the page says it is held to, under its title: `Only: $browser = Chrome`; empty when nothing is locked."""
    text = locked_text(properties)
    return f"Only: {text}" if text else ""


def _value_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "(none)" if value is None else str(value)


@csrf_exempt  # it takes no POST: any other method is a 405, not the CSRF check's 403
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
    except EmbedRefused as refusal:
        # Why, for whoever runs the service (a customer asking why their link shows nothing); never to the viewer.
        logger.info("An embed token was refused: %s", refusal)
        return not_found(request, as_json=as_json)
    if embed.endpoint is not None:
        return endpoint_response(request, embed)
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
    context["locked_line"] = locked_statement(embed.properties)
    context["tiles"] = [withheld(tile, results) for tile in context["tiles"]]
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


def withheld(shown, results: PageResults):
    """A tile the page shows no result of, drawn as the reason why (and no "computed" line: nothing was)."""
    reason = results.withheld.get(shown.tile.insight_id) if shown.tile.insight_id else None
    if reason is None:
        return shown
    return dataclasses.replace(shown, chart=Chart(kind="withheld", reason=reason), meta="")


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
