"""The real URL configuration plus one route that fails, to test the 500 body."""

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


urlpatterns = [path("api/failing/", FailingViewSet.as_view({"get": "list", "post": "create"})), *real_urlpatterns]
