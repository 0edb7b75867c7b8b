"""The service's own page of a dashboard or an insight for a signed-in member: `/project/<id>/dashboard/<id>` and
`/project/<id>/insights/<short_id>`, the links the reference's clients and agent toolkit hand out.

The same page as a shared dashboard's (dashboards.public.pages), drawn from the object itself rather than from a
sharing token: whoever is signed in and is a member of the project's organization sees it, whether or not the
dashboard is shared; anyone else is sent to sign in, and a member of another organization gets the same 404 as a
link to nothing. Results come from the same cache as the page's public twin (computed at most once per
SHARED_PAGE_REFRESH_SECONDS), so reading a page never costs more than its shared page would.
"""

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


def member_project(request, project_id: int):
    """The project, when the signed-in person is a member of its organization; else 404 (the same for a project that
    does not exist)."""
    # A signed-in session carries no key, so no key's limits: the person's memberships are all there is.
    project = Project.objects.filter(pk=project_id, organization__memberships__user=request.user).first()
    if project is None:
        raise Http404("No such project.")
    return project


@require_http_methods(["GET", "HEAD"])
@never_cache
def member_dashboard(request, project_id: int, dashboard_id: int):
    """A dashboard's page, with its own filters and range; `?format=json` gives its numbers."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    project = member_project(request, project_id)
    dashboard = get_object_or_404(
        Dashboard.objects.select_related("project"), pk=dashboard_id, project=project, deleted=False
    )
    shown = stated_range(project=project, filters=dashboard.filters, override=None)
    results = PageResults(project=project, filters=dashboard.filters, dates=None)
    tiles = list(shown_tiles().filter(dashboard=dashboard).select_related("insight", "text"))
    if request.GET.get("format") == "json":
        return json_response(dashboard, tiles, results, shown)
    return page_response(request, page_context(request, dashboard, tiles, results, shown))


@require_http_methods(["GET", "HEAD"])
@never_cache
def member_insight(request, project_id: int, short_id: str):
    """An insight's page: its chart alone, with its own range, drawn as a dashboard of one tile."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    project = member_project(request, project_id)
    insight = get_object_or_404(
        Insight.objects.select_related("project"), short_id=short_id, project=project, deleted=False
    )
    # An unsaved tile: the page lays out tiles, and one without a layout takes the page's width.
    tile = DashboardTile(insight=insight, layouts={})
    shown = stated_range(project=project, filters={}, override=None)
    results = PageResults(project=project, filters={}, dates=None)
    return page_response(request, page_context(request, insight, [tile], results, shown))
