from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from workspace.api.routers import OptionalSlashRouter
from workspace.views import UserViewSet, api_not_found, landing_page

users_router = OptionalSlashRouter()
users_router.register("users", UserViewSet, basename="users")

organization_routes = [
    path("", include("organizations.nested_urls")),
    path("", include("pipelines.urls")),
]
project_routes = [
    path("", include("dashboards.urls")),
]

urlpatterns = [
    path("", landing_page, name="landing"),
    path("admin/", admin.site.urls),
    re_path(r"^api/schema/?$", SpectacularAPIView.as_view(), name="schema"),
    re_path(r"^api/docs/?$", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/", include(users_router.urls)),
    path("api/", include("apikeys.urls")),
    path("api/", include("organizations.urls")),
    path("api/organizations/<str:organization_id>/", include(organization_routes)),
    path("api/projects/<str:project_id>/", include(project_routes)),
    re_path(r"^api(/|$)", api_not_found),
]

handler404 = "workspace.views.api_not_found"
handler500 = "workspace.views.server_error"
