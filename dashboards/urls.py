"""Routes under /api/projects/{project_id}/."""

from django.urls import re_path

from dashboards.core.views import DashboardCollaboratorViewSet, DashboardViewSet, InsightViewSet
from dashboards.public.views import DashboardSharingViewSet, EmbedSecretViewSet, SharingPasswordViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("dashboards", DashboardViewSet, basename="project-dashboards")
# /api/projects/{project_id}/dashboards/{dashboard_id}/collaborators/[{user__uuid}/]
router.register(
    r"dashboards/(?P<dashboard_id>[^/.]+)/collaborators",
    DashboardCollaboratorViewSet,
    basename="project-dashboard-collaborators",
)
router.register("insights", InsightViewSet, basename="project-insights")
# /api/projects/{project_id}/embed_secrets/[{id}/[rotate/]]
router.register("embed_secrets", EmbedSecretViewSet, basename="project-embed-secrets")
# /api/projects/{project_id}/dashboards/{dashboard_id}/sharing/passwords/[{id}/]
router.register(
    r"dashboards/(?P<dashboard_id>[^/.]+)/sharing/passwords",
    SharingPasswordViewSet,
    basename="project-dashboard-sharing-passwords",
)

urlpatterns = [
    *router.urls,
    # A single object rather than a list, so it is mapped by hand instead of registered on the router.
    re_path(
        r"^dashboards/(?P<dashboard_id>[^/.]+)/sharing/?$",
        DashboardSharingViewSet.as_view({"get": "retrieve", "patch": "partial_update"}),
        name="project-dashboard-sharing-detail",
    ),
    re_path(
        r"^dashboards/(?P<dashboard_id>[^/.]+)/sharing/refresh/?$",
        DashboardSharingViewSet.as_view({"post": "refresh"}, **DashboardSharingViewSet.refresh.kwargs),
        name="project-dashboard-sharing-refresh",
    ),
]
