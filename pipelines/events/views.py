import uuid

from django.http import Http404

from organizations.tenancy import ProjectScopedViewSet
from pipelines.events.filters import PersonFilterSet
from pipelines.events.models import Person
from pipelines.events.serializers import PersonSerializer
from workspace.api.viewsets import ListMixin, RetrieveMixin


class PersonViewSet(ProjectScopedViewSet, ListMixin, RetrieveMixin):
    """A project's persons, newest first; one is found by its number or its uuid, as the reference finds it."""

    # /api/projects/{project_id}/persons/
    scope_object = "person"
    serializer_class = PersonSerializer
    filterset_class = PersonFilterSet
    queryset = Person.objects.none()
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        return self.project.persons.order_by(*Person.NEWEST_FIRST)

    def initial(self, request, *args, **kwargs):
        # A number is the person's id, anything else its uuid: this request's lookup (a viewset serves one request),
        # decided before anything reads the object, OPTIONS's existence check included.
        value = kwargs.get(self.lookup_url_kwarg or self.lookup_field)
        if value is not None and not (value.isascii() and value.isdigit() and len(value) < 19):
            self.lookup_url_kwarg, self.lookup_field = self.lookup_url_kwarg or self.lookup_field, "uuid"
        super().initial(request, *args, **kwargs)

    def lookup_value(self, value: str):
        return uuid_or_404(value) if self.lookup_field == "uuid" else value


def uuid_or_404(value: str) -> uuid.UUID:
    """A uuid from the URL; anything else names no event or person (404, as an unknown one)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise Http404 from None
