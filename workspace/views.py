from django.db.models import Prefetch
from django.shortcuts import render
from django.views import defaults
from drf_spectacular.utils import extend_schema
from rest_framework import mixins
from rest_framework.response import Response

from apikeys.models import PersonalAPIKey
from organizations.models import Membership
from workspace.api.exceptions import error_response
from workspace.api.viewsets import BaseViewSet
from workspace.models import User
from workspace.serializers import MeSerializer


class UserViewSet(BaseViewSet, mixins.RetrieveModelMixin):
    # /api/users/@me/ only: a key reads its own user, never anyone else's.
    scope_object = "user"
    serializer_class = MeSerializer
    lookup_value_regex = "@me"
    queryset = User.objects.none()

    @extend_schema(summary="The calling user, their organizations and current organization and project")
    def retrieve(self, request, *args, **kwargs):
        memberships = Membership.objects.filter(user=request.user).select_related("organization").order_by("joined_at")
        key = request.auth
        if isinstance(key, PersonalAPIKey) and key.scoped_organizations:
            memberships = memberships.filter(organization_id__in=key.scoped_organizations)
        user = (
            User.objects.select_related("current_organization", "current_project")
            .prefetch_related(Prefetch("memberships", queryset=memberships, to_attr="visible_memberships"))
            .get(pk=request.user.pk)
        )
        return Response(self.get_serializer(user).data)


def landing_page(request):
    return render(request, "workspace/index.html")


def api_not_found(request, exception=None):
    """JSON 404 under /api/ for URLs no route matches; the usual page elsewhere."""
    if request.path == "/api" or request.path.startswith("/api/"):
        return error_response(404, "invalid_request", "not_found", "Not found.")
    return defaults.page_not_found(request, exception)


def server_error(request):
    if request.path.startswith("/api/"):
        return error_response(500, "server_error", "error", "A server error occurred.")
    return defaults.server_error(request)
