"""The real URL configuration plus routes that fail, to test the 500 and 503 bodies and what a refused write
leaves."""

from django.db import OperationalError, connection
from django.urls import path
from rest_framework import mixins
from rest_framework.response import Response

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


class RefusedAfterAWriteViewSet(BaseViewSet):
    """Writes an organization named after the action, then answers 400 saying whether a transaction was open:
    `create` is declared outside the request's transaction, `update` is not."""

    scope_object = "organization"
    outside_transaction = frozenset({"create"})

    def create(self, request, *args, **kwargs):
        return self.write_then_refuse("created")

    def update(self, request, *args, **kwargs):
        return self.write_then_refuse("updated")

    def write_then_refuse(self, slug: str) -> Response:
        Organization.objects.create(name=slug, slug=slug)
        return Response({"in_transaction": connection.in_atomic_block}, status=400)


class AllRefusedAfterAWriteViewSet(RefusedAfterAWriteViewSet):
    outside_transaction = True


def database_down_outside_drf(request):
    raise OperationalError("server closed the connection unexpectedly")


urlpatterns = [
    path("api/failing/", FailingViewSet.as_view({"get": "list", "post": "create"})),
    path("api/database-down/", DatabaseDownViewSet.as_view({"get": "list"})),
    path("api/database-down-outside-drf/", database_down_outside_drf),
    path("api/refused-after-a-write/", RefusedAfterAWriteViewSet.as_view({"post": "create", "put": "update"})),
    path("api/all-refused-after-a-write/", AllRefusedAfterAWriteViewSet.as_view({"post": "create", "put": "update"})),
    *real_urlpatterns,
]
