"""The public page of a shared dashboard, `/shared/<access_token>`: plain HTML for whoever holds the link, no key.

Not an API view: it renders a template, loads nothing from elsewhere and runs no script, so it works under the
service's HTML Content-Security-Policy and offline.

A page that asks for a password shows a form instead until one of the sharing's passwords is given. The unlock is a
signed, HttpOnly cookie for that page alone (its salt holds the token, its path the page) naming the password that
opened it, for 24 hours: revoking that password, or refreshing the token, locks the page again at once. Failed
attempts are counted per address and every attempt is recorded in the activity log.

The page tells the truth (DECISIONS.md §19): it states the date range in force and the project's time zone, when
each result was computed, and draws the tiles where their layout puts them. Each tile computes its effective query
(dashboards.core.results): the dashboard's filters, or the range a viewer picked where the sharing allows it (one of the
reference's relative ranges, no further back than `max_lookback_days`; clamped and said so beyond). Viewers never
change properties. Results are computed at most once per SHARED_PAGE_REFRESH_SECONDS per query for every viewer;
views are throttled per address (`shared_page_view` rate). `?format=json` gives every number of the page.

A view waits SHARED_PAGE_WAIT_SECONDS at most for computations other views started: then a tile shows its last result,
saying it is being refreshed, or that it is being computed, and the HTML page carries `Refresh` (the JSON
`Retry-After`) so that the viewer comes back for it. A page is at most SHARED_PAGE_MAX_BYTES: a tile whose result
would take it past that is left out, saying why, counted as it is written (`bounded_json`), never held whole.

The page's rendering (`page_context`, `page_response`, `json_response`) is shared with other public pages of a
dashboard (the signed embed, dashboards.public.embed_pages), which pass their own results and range.
"""

import datetime as dt
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.exceptions import Throttled

from dashboards.core.models import DashboardTile, SharingConfiguration, SharingPassword
from dashboards.core.results import InsightResults
from dashboards.public.charts import Chart, chart
from dashboards.public.ranges import PageRange, days_text, page_range
from dashboards.public.results import PageResults
from dashboards.public.selectors import shared_dashboard_get
from dashboards.public.services import sharing_password_matching
from workspace.api.throttling import FailedAuthenticationThrottle, FixedWindowRateThrottle
from workspace.services import activity_log_record

logger = logging.getLogger(__name__)

PAGE = "dashboards/shared_dashboard.html"
LOCKED_PAGE = "dashboards/shared_dashboard_locked.html"
UNLOCK_COOKIE = "shared_unlock"
UNLOCK_MAX_AGE = 24 * 3600
# A page with a tile still being computed asks the browser (`Refresh`) or a script (`Retry-After`) to come back then.
COMPUTING_RETRY_SECONDS = 5
TOO_LARGE = (
    "result_too_large: This tile's result is larger than a public page may send (SHARED_PAGE_MAX_BYTES, {limit:,} "
    "bytes), so it is not shown here."
)
PAGE_TOO_LARGE = (
    "result_too_large: This page is larger than a public page may be (SHARED_PAGE_MAX_BYTES, {limit:,} bytes); its "
    "numbers are in ?format=json."
)


class SharedPageUnlockThrottle(FailedAuthenticationThrottle):
    """Wrong passwords for shared pages per client address (`shared_page_unlock` rate)."""

    scope = "shared_page_unlock"


class SharedPageViewThrottle(FixedWindowRateThrottle):
    """Views of public dashboard pages per client address (`shared_page_view` rate, `SHARED_PAGE_VIEW_RATE`): they
    need no key, so the address is all there is to count."""

    scope = "shared_page_view"

    def get_cache_key(self, request, view=None):
        return f"throttle:{self.scope}:ip:{self.get_ident(request)}"


def refused_view(request) -> Throttled | None:
    """Count this view of a public page against its address's rate; the refusal when it is over."""
    throttle = SharedPageViewThrottle()
    if throttle.allow_request(request, None):
        return None
    return Throttled(wait=throttle.wait())


@require_http_methods(["GET", "HEAD", "POST"])
@never_cache
def shared_dashboard(request, access_token: str):
    """The dashboard's name, description and tiles; 404 when the token is unknown, sharing is off or expired, or the
    dashboard is deleted (the same answer for each, so a token's past is not revealed). POST gives a password. 429
    when the address has viewed too many pages lately."""
    refusal = refused_view(request)
    if refusal is not None:
        response = page(request, LOCKED_PAGE, {"too_many_views": True}, status=429)
        response["Retry-After"] = str(int(refusal.wait or 1))
        return response
    dashboard = shared_dashboard_get(access_token=access_token)
    if dashboard is None:
        raise Http404("No shared dashboard here.")
    configuration = dashboard.sharing_configuration
    if configuration.password_required:
        if request.method == "POST":
            return unlock(request, configuration)
        if unlocked_by(request, configuration) is None:
            return page(request, LOCKED_PAGE, {"wrong": False}, status=403)
    elif request.method == "POST":
        return HttpResponseNotAllowed(["GET", "HEAD"])
    shown = page_range(
        dashboard,
        requested=request.GET.get("date_from") if configuration.allow_viewer_date_range else None,
        max_lookback_days=configuration.max_lookback_days,
        offer_choices=configuration.allow_viewer_date_range,
    )
    results = PageResults(project=dashboard.project, filters=dashboard.filters, dates=shown.override)
    tiles = list(dashboard.tiles.all())
    if request.GET.get("format") == "json":
        return json_response(dashboard, tiles, results, shown)
    return page_response(request, page_context(request, dashboard, tiles, results, shown))


def unlock(request, configuration: SharingConfiguration):
    throttle = SharedPageUnlockThrottle()
    try:
        throttle.refuse_if_over(request)
    except Throttled as refusal:
        response = page(request, LOCKED_PAGE, {"throttled": True}, status=429)
        response["Retry-After"] = str(int(refusal.wait or 1))
        return response
    password = sharing_password_matching(configuration=configuration, raw_password=request.POST.get("password", ""))
    record_attempt(request, configuration, password)
    if password is None:
        throttle.record_failure(request)
        return page(request, LOCKED_PAGE, {"wrong": True}, status=403)
    response = redirect(request.path, permanent=False)
    response.status_code = 303  # see the page with a GET
    response.set_signed_cookie(
        UNLOCK_COOKIE,
        str(password.pk),
        salt=cookie_salt(configuration),
        max_age=UNLOCK_MAX_AGE,
        path=f"/shared/{configuration.access_token}",
        secure=request.is_secure(),
        httponly=True,
        samesite="Lax",
    )
    return response


def unlocked_by(request, configuration: SharingConfiguration) -> SharingPassword | None:
    """The password whose unlock cookie this request carries, if it is still one of the sharing's."""
    password_id = request.get_signed_cookie(
        UNLOCK_COOKIE, default=None, salt=cookie_salt(configuration), max_age=UNLOCK_MAX_AGE
    )
    if password_id is None:
        return None
    return configuration.passwords.filter(pk=password_id).first()


def cookie_salt(configuration: SharingConfiguration) -> str:
    # A cookie opens the page of the token it was made for only: a new token makes every earlier one worthless.
    return f"dashboards.shared-page:{configuration.access_token}"


def record_attempt(request, configuration: SharingConfiguration, password: SharingPassword | None) -> None:
    dashboard = configuration.dashboard
    activity_log_record(
        user=None,
        api_key=None,
        scope="SharingConfiguration",
        item_id=configuration.pk,
        activity="unlocked" if password is not None else "unlock_failed",
        organization_id=dashboard.project.organization_id,
        project_id=dashboard.project_id,
        name=dashboard.name,
        after={"password": str(password.pk) if password is not None else None, "address": client_address(request)},
    )


def client_address(request) -> str:
    return SharedPageUnlockThrottle().get_ident(request)


def page(request, template: str, context: dict, status: int = 200):
    response = render(request, template, context, status=status)
    # The token is in the URL: never send it on as a referrer, and keep the page out of search engines. The password
    # form's page says same-origin instead (other sites still get nothing): under no-referrer browsers send the form
    # with `Origin: null`, which CSRF protection rightly refuses.
    response["Referrer-Policy"] = "same-origin" if template == LOCKED_PAGE else "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response


# The page's rendering, shared by the public pages of a dashboard (this one and the signed embed's).

GRID_COLUMNS = 12
DEFAULT_WIDTH, DEFAULT_HEIGHT = 6, 5  # of a tile whose layout leaves them out, as the reference's grid does


@dataclass(frozen=True)
class PageTile:
    """A tile as the page draws it: its insight's chart (None for a text), a line saying which dates its result
    covers and when it was computed, and its place on the grid (`place`: the CSS class its rule is written for)."""

    tile: DashboardTile
    name: str = ""
    chart: Chart | None = None
    meta: str = ""
    place: str = ""
    wide: bool = False


@dataclass(frozen=True)
class Placement:
    """Where a tile goes on a wide screen: grid lines of the 12 columns and of the rows its layout's `y` and `h` make
    (rows no tile starts or ends on are left out, so an unused stretch of the layout leaves no gap)."""

    place: str
    column: int
    span: int
    row_start: int
    row_end: int


def page_context(request, dashboard, tiles: Sequence[DashboardTile], results: InsightResults, shown: PageRange):
    """The template's context of a dashboard's page (PAGE): `dashboard` (or anything with a name and a description),
    its shown `tiles` in order, their `results` (an InsightResults that computes each tile's effective query) and
    the range `shown`. Tiles are drawn in the order of their layouts (top to bottom, left to right) and placed by
    them on wide screens; without a layout, after the others, in their order."""
    tz = ZoneInfo(dashboard.project.time_zone if hasattr(dashboard, "project") else "UTC")
    laid = {tile.pk: _layout(tile) for tile in tiles}
    lines = sorted({edge for layout in laid.values() if layout for edge in (layout[1], layout[1] + layout[3])})
    row_of = {edge: index + 1 for index, edge in enumerate(lines)}
    ordered = sorted(
        tiles,
        key=lambda tile: (0, laid[tile.pk][1], laid[tile.pk][0]) if laid[tile.pk] else (1, 0, 0),
    )
    shown_tiles, placements = [], []
    budget, computing = settings.SHARED_PAGE_MAX_BYTES, False
    for index, tile in enumerate(ordered):
        place = f"at-{index}"
        layout = laid[tile.pk]
        if layout is not None:
            x, y, w, h = layout
            placements.append(Placement(place=place, column=x + 1, span=w, row_start=row_of[y], row_end=row_of[y + h]))
        if not tile.insight_id:
            shown_tiles.append(PageTile(tile=tile, place=place))
            continue
        insight = tile.insight
        result = results.of(insight)
        size = bounded_size(result["result"], max(budget, 0)) if result["result"] is not None else 0
        if size is None:  # drawn, it would take the page past its bound: not drawn, and said
            result = too_large(result)
        else:
            budget -= size
        computing = computing or bool(result.get("computing"))
        try:
            drawn = chart(insight, result)
        except Exception:  # a result of a shape the chart does not expect: this tile says so, the page still shows
            logger.exception("The chart of insight %s could not be drawn on a public page.", insight.pk)
            drawn = Chart(kind="empty")
        shown_tiles.append(
            PageTile(
                tile=tile,
                name=insight.name or insight.derived_name or "Untitled insight",
                chart=drawn,
                meta=tile_meta(result, tz),
                place=place,
                wide=layout is None and drawn.kind == "retention",
            )
        )
    numbers = {"date_from": shown.chosen} if shown.chosen else {}
    return {
        "dashboard": dashboard,
        "tiles": shown_tiles,
        "placements": placements,
        "range": shown,
        "numbers_href": "?" + urlencode({**numbers, "format": "json"}),
        "computing": computing,
    }


def _layout(tile: DashboardTile) -> tuple[int, int, int, int] | None:
    """The tile's `layouts.sm` as (x, y, w, h) on the 12-column grid, kept on it; None without a usable one."""
    layout = (tile.layouts or {}).get("sm") if isinstance(tile.layouts, dict) else None
    if not isinstance(layout, dict):
        return None
    values = [layout.get(name) for name in ("x", "y", "w", "h")]
    defaults = (None, None, DEFAULT_WIDTH, DEFAULT_HEIGHT)
    values = [default if value is None else value for value, default in zip(values, defaults, strict=True)]
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        return None
    x, y, w, h = values
    x = min(max(x, 0), GRID_COLUMNS - 1)
    return x, min(max(y, 0), 100_000), min(max(w, 1), GRID_COLUMNS - x), min(max(h, 1), 1_000)


def tile_meta(result: dict, tz: ZoneInfo) -> str:
    """Which dates the tile's result covers and when it was computed, in the project's time zone; or that it is being
    computed, or too large to show."""
    if result.get("computing"):
        return "Being computed: this page shows it in a few seconds"
    if (result.get("error") or "").startswith("result_too_large"):
        return "Too large to show on this page"
    parts = []
    covered = result.get("resolved_date_range") or {}
    try:
        first = dt.datetime.fromisoformat(covered["date_from"]).astimezone(tz)
        last = (dt.datetime.fromisoformat(covered["date_to"]) - dt.timedelta(microseconds=1)).astimezone(tz)
        parts.append(days_text(first, last))
    except (KeyError, TypeError, ValueError):
        pass
    try:
        computed = dt.datetime.fromisoformat(result["last_refresh"]).astimezone(tz)
        parts.append(f"computed {computed.day} {computed:%b %Y, %H:%M}")
        if result.get("stale"):
            parts.append("being refreshed")
    except (KeyError, TypeError, ValueError):
        parts.append("not computed")
    text = " · ".join(parts)
    return text[0].upper() + text[1:]


def page_response(request, context: dict, status: int = 200):
    """The dashboard's page, HTML, with the public pages' headers; `Refresh` while a tile is being computed. A page
    past SHARED_PAGE_MAX_BYTES (its tiles' results fit, their drawing does not) is a 400 `result_too_large`."""
    response = page(request, PAGE, context, status=status)
    if len(response.content) > settings.SHARED_PAGE_MAX_BYTES:
        return page_too_large()
    if context.get("computing"):
        response["Refresh"] = str(COMPUTING_RETRY_SECONDS)
    return response


def page_too_large():
    detail = PAGE_TOO_LARGE.format(limit=settings.SHARED_PAGE_MAX_BYTES)
    response = HttpResponse(detail.encode(), status=400, content_type="text/plain; charset=utf-8")
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response


def bounded_json(value, limit: int) -> str | None:
    """`value` as JSON text, or None as soon as it passes `limit` bytes: the encoder's pieces are counted as they
    come, so a result larger than the bound is never written out whole."""
    pieces, size = [], 0
    for piece in DjangoJSONEncoder(separators=(",", ":")).iterencode(value):
        size += len(piece.encode()) if not piece.isascii() else len(piece)
        if size > limit:
            return None
        pieces.append(piece)
    return "".join(pieces)


def bounded_size(value, limit: int) -> int | None:
    """The size of `value` as JSON, in bytes, or None when past `limit` (counted as bounded_json counts it)."""
    size = 0
    for piece in DjangoJSONEncoder(separators=(",", ":")).iterencode(value):
        size += len(piece.encode()) if not piece.isascii() else len(piece)
        if size > limit:
            return None
    return size


def too_large(result: dict) -> dict:
    """A tile's result left out of a page it would take past SHARED_PAGE_MAX_BYTES, saying so."""
    error = TOO_LARGE.format(limit=settings.SHARED_PAGE_MAX_BYTES)
    return {**result, "result": None, "hasMore": None, "columns": None, "types": None, "error": error}


def json_response(
    dashboard,
    tiles: Sequence[DashboardTile],
    results: InsightResults,
    shown: PageRange,
    *,
    first: dict | None = None,
):
    """Every number of the page, as JSON (after the fields `first`, when given): each tile with its insight's whole
    result (every series, every row), in the fields the API's insights carry it in, and the range in force. Written
    tile by tile within SHARED_PAGE_MAX_BYTES: a tile whose result would pass it has none, and an `error` saying so.
    While a tile is being computed, `computing` is true and `Retry-After` says when to ask again."""
    override = shown.override
    data = {
        **(first or {}),
        "name": dashboard.name,
        "description": dashboard.description,
        "timezone": dashboard.project.time_zone,
        "date_range": {
            "date_from": override.date_from if override else None,
            "date_to": override.date_to if override else None,
            "stated": shown.line,
            "note": shown.note or None,
        },
    }
    budget = settings.SHARED_PAGE_MAX_BYTES - len(json.dumps(data, cls=DjangoJSONEncoder).encode())
    written, computing = [], False
    for tile in tiles:
        shown_tile = _json_tile(tile, results)
        text = bounded_json(shown_tile, max(budget, 0))
        if text is None:
            if "insight" in shown_tile:
                shown_tile["insight"] = too_large(shown_tile["insight"])
            else:
                shown_tile["text"] = {"body": "", "error": TOO_LARGE.format(limit=settings.SHARED_PAGE_MAX_BYTES)}
            text = json.dumps(shown_tile, cls=DjangoJSONEncoder, separators=(",", ":"))
        budget -= len(text.encode()) + 1
        computing = computing or bool(shown_tile.get("insight", {}).get("computing"))
        written.append(text)
    data["computing"] = computing
    head = json.dumps(data, cls=DjangoJSONEncoder, separators=(",", ":"))
    body = f'{head[:-1]},"tiles":[{",".join(written)}]}}'
    response = HttpResponse(body.encode(), content_type="application/json")
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    if computing:
        response["Retry-After"] = str(COMPUTING_RETRY_SECONDS)
    return response


def _json_tile(tile: DashboardTile, results: InsightResults) -> dict:
    shown = {"id": tile.pk, "layouts": tile.layouts or {}, "color": tile.color}
    if not tile.insight_id:
        return {**shown, "text": {"body": tile.text.body if tile.text_id else ""}}
    insight = tile.insight
    return {
        **shown,
        "insight": {
            "short_id": insight.short_id,
            "name": insight.name,
            "derived_name": insight.derived_name,
            "description": insight.description,
            **results.of(insight),
        },
    }
