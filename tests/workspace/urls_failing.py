"""The real URL configuration plus routes that fail, to test the 500 and 503 bodies."""

from django.db import OperationalError
from django.urls import path
from rest_framework import mixins

from organizations.models import Organization
from workspace.api.viewsets import BaseViewSet
from workspace.urls import urlpatterns as real_urlpatterns


class FailingViewSet(BaseViewSet, mixins.ListModelMixin):
    scope_object = "organization"

    def list(self, request, *args, **kwargs):
        raise RuntimeError("secret internal detail")

    def create(self, request, *args, **kwargs):
        Organization.objects.create(name="Half-written", slug="half-written")
        raise RuntimeError("failed after a write")


class DatabaseDownViewSet(BaseViewSet, mixins.ListModelMixin):
    scope_object = "organization"

    def list(self, request, *args, **kwargs):
        raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")


def database_down_outside_drf(request):
    raise OperationalError("server closed the connection unexpectedly")


urlpatterns = [
    path("api/failing/", FailingViewSet.as_view({"get": "list", "post": "create"})),
    path("api/database-down/", DatabaseDownViewSet.as_view({"get": "list"})),
    path("api/database-down-outside-drf/", database_down_outside_drf),
    *real_urlpatterns,
]
