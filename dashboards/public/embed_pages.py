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

Framing is what the secret allows: `Content-Security-Policy: frame-ancestors` names its allowed origins (none:
`'none'`), in place of the default policy's. Views count against the shared pages' rate per address, before the
token is read; every refused token gets the same 404.
"""

import dataclasses
from urllib.parse import urlencode

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_http_methods

from dashboards.core.models import DashboardTile
from dashboards.core.results import FILTERED_KINDS, WRAPPERS, DateOverride
from dashboards.core.selectors import shown_tiles
from dashboards.public.charts import Chart
from dashboards.public.embeds import (
    Embed,
    EmbedRefused,
    ViewerRange,
    embed_from_token,
    offered_ranges,
    viewer_range,
)
from dashboards.public.pages import json_response, page, page_context, page_response, refused_view
from dashboards.public.ranges import VIEWER_RANGES, PageRange, RangeChoice, stated_range
from dashboards.public.results import PageResults

NOT_FOUND_PAGE = "dashboards/embed_not_found.html"
NOT_FOUND = {"type": "invalid_request", "code": "not_found", "detail": "Not found.", "attr": None}
UNLOCKABLE = "A {kind} cannot be limited to {locked}, so this tile shows no number here."
CLAMPED = "This page shows no more than the dates its link allows, so it shows the part of your range inside them."
SNAPPED = "This page does not offer that date range, so it shows the nearest one it does."
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

    def __init__(self, embed: Embed, override: DateOverride | None):
        super().__init__(
            project=embed.project,
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


@require_http_methods(["GET", "HEAD"])
@never_cache
@xframe_options_exempt  # the Content-Security-Policy's frame-ancestors decides who may frame it
def embedded_page(request, token: str):
    """The embed's tiles, as HTML or (`?format=json`) JSON; 404 for a token that grants nothing, 429 over the rate."""
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
    results = EmbedResults(embed, override)
    resource = embed.dashboard or embed.insight
    tiles = embed_tiles(embed)
    if as_json:
        response = json_response(resource, tiles, results, shown, first=embed_fields(embed))
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
