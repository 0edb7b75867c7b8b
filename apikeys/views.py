from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins

from apikeys.models import PersonalAPIKey
from apikeys.serializers import PersonalAPIKeySerializer
from workspace.api.viewsets import BaseViewSet


class PersonalAPIKeyViewSet(BaseViewSet, mixins.RetrieveModelMixin):
    # /api/personal_api_keys/@current/: any valid key may describe itself, whatever its scopes.
    required_scopes: list[str] = []
    serializer_class = PersonalAPIKeySerializer
    lookup_value_regex = "@current"
    queryset = PersonalAPIKey.objects.none()

    def check_object_exists(self) -> None:
        """`@current` is the key of the request itself."""

    @extend_schema(summary="The key that authenticated this request")
    def retrieve(self, request, *args, **kwargs):
        if not isinstance(request.auth, PersonalAPIKey):
            raise exceptions.NotFound("This request was not made with a personal API key.")
        return self.object_response(request.auth)
