"""The service's own page of a dashboard or an insight for a signed-in member: `/project/<id>/dashboard/<id>` and
`/project/<id>/insights/<short_id>`, the links the reference's clients and agent toolkit hand out.

The same page as a shared dashboard's (dashboards.public.pages), drawn from the object itself rather than from a
sharing token: whoever is signed in and is a member of the project's organization sees it, whether or not the
dashboard is shared; anyone else is sent to sign in, and a member of another organization gets the same 404 as a
link to nothing. Results come from the same cache as the page's public twin (computed at most once per
SHARED_PAGE_REFRESH_SECONDS), so reading a page never costs more than its shared page would.
"""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from dashboards.core.models import Dashboard, DashboardTile, Insight
from dashboards.core.selectors import shown_tiles
from dashboards.public.pages import json_response, page_context, page_response
from dashboards.public.ranges import stated_range
from dashboards.public.results import PageResults
from organizations.models import Project


def member_page(view):
    """A page for a signed-in member of the project in its URL: the view gets the project; anyone not signed in is
    sent to sign in and back, anyone else gets 404 (the same as for a project that does not exist)."""

    @require_http_methods(["GET", "HEAD"])
    @never_cache
    @wraps(view)
    def page(request, project_id: str, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        # A signed-in session carries no key, so no key's limits: the person's memberships are all there is.
        project = Project.objects.filter(pk=project_id, organization__memberships__user=request.user).first()
        if project is None:
            raise Http404("No such project.")
        return view(request, project, **kwargs)

    return page


@member_page
def member_dashboard(request, project, dashboard_id: str):
    """A dashboard's page, with its own filters and range; `?format=json` gives its numbers."""
    dashboard = get_object_or_404(
        Dashboard.objects.select_related("project"), pk=dashboard_id, project=project, deleted=False
    )
    shown = stated_range(project=project, filters=dashboard.filters, override=None)
    results = PageResults(project=project, filters=dashboard.filters, dates=None)
    tiles = list(shown_tiles().filter(dashboard=dashboard).select_related("insight", "text"))
    if request.GET.get("format") == "json":
        return json_response(dashboard, tiles, results, shown)
    return page_response(request, page_context(request, dashboard, tiles, results, shown))


@member_page
def member_insight(request, project, short_id: str):
    """An insight's page: its chart alone, with its own range, drawn as a dashboard of one tile."""
    insight = get_object_or_404(
        Insight.objects.select_related("project"), short_id=short_id, project=project, deleted=False
    )
    # An unsaved tile: the page lays out tiles, and one without a layout takes the page's width.
    tile = DashboardTile(insight=insight, layouts={})
    shown = stated_range(project=project, filters={}, override=None)
    results = PageResults(project=project, filters={}, dates=None)
    return page_response(request, page_context(request, insight, [tile], results, shown))
