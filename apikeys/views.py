from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status
from rest_framework.decorators import action

from apikeys.models import PersonalAPIKey, ProjectSecretKey
from apikeys.permissions import NotAProjectKey
from apikeys.serializers import (
    NewProjectSecretKeyResponseSerializer,
    PersonalAPIKeySerializer,
    ProjectSecretKeyRollSerializer,
    ProjectSecretKeySerializer,
)
from apikeys.services import project_key_create, project_key_revoke, project_key_roll, project_key_update
from organizations.models import Membership
from organizations.tenancy import ProjectScopedViewSet
from workspace.api.viewsets import (
    BaseViewSet,
    CreateMixin,
    DestroyMixin,
    ListMixin,
    RetrieveMixin,
    UpdateMixin,
)


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


PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)
SECRET_KEY_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The key's id.")
ADMIN = Membership.Level.ADMIN


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID], summary="The project's secret keys, without their secrets"),
    create=extend_schema(
        parameters=[PROJECT_ID],
        responses={201: NewProjectSecretKeyResponseSerializer},
        summary="Issue a secret key of the project, shown once in this answer",
    ),
    retrieve=extend_schema(parameters=[PROJECT_ID, SECRET_KEY_ID]),
    update=extend_schema(parameters=[PROJECT_ID, SECRET_KEY_ID]),
    partial_update=extend_schema(
        parameters=[PROJECT_ID, SECRET_KEY_ID], summary="Change a key's label, scopes or endpoints"
    ),
    destroy=extend_schema(
        parameters=[PROJECT_ID, SECRET_KEY_ID], summary="Revoke a key: it is refused from the next request on"
    ),
)
class ProjectSecretKeyViewSet(ProjectScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin):
    """/api/projects/{project_id}/secret_keys/[{id}/[roll/]]: keys that belong to the project, not to a person
    (DECISIONS.md §21). Project admins manage them with a person's key or a session; a project's key never does
    (`NotAProjectKey`). A revoked key is gone from the API (kept in admin, for the record)."""

    scope_object = "project"
    queryset = ProjectSecretKey.objects.none()
    serializer_class = ProjectSecretKeySerializer
    permission_classes = [*ProjectScopedViewSet.permission_classes, NotAProjectKey]
    # A key reaches the project's data whoever holds it: project admins only, to read the list too.
    required_level = dict.fromkeys(("list", "retrieve", "create", "update", "partial_update", "destroy", "roll"), ADMIN)
    activity_scope = "ProjectSecretKey"

    def get_queryset(self):
        return self.project.secret_keys.filter(revoked_at__isnull=True).order_by("-created_at", "-id")

    def etag_state(self, representation: dict) -> dict:
        return {name: value for name, value in representation.items() if name != "key"}

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.check_input_permissions(serializer.validated_data)
        key, plaintext = project_key_create(actor=request.user, project=self.project, **serializer.validated_data)
        data = {**self.record_created(key), "key": plaintext}
        return self.object_response(data=data, status_code=status.HTTP_201_CREATED)

    def update_object(self, instance, changes):
        return project_key_update(actor=self.request.user, key=instance, **changes)

    def destroy_object(self, instance):
        project_key_revoke(actor=self.request.user, key=instance)

    @extend_schema(
        parameters=[PROJECT_ID, SECRET_KEY_ID],
        request=ProjectSecretKeyRollSerializer,
        responses=NewProjectSecretKeyResponseSerializer,
        summary="Give a key a new secret, shown once; the previous one works on for the overlap asked",
    )
    @action(detail=True, methods=["post"], required_scopes=["project:write"])
    def roll(self, request, *args, **kwargs):
        key = self.get_object()
        serializer = ProjectSecretKeyRollSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        shown = {}

        def roll(key: ProjectSecretKey) -> ProjectSecretKey:
            key, shown["key"] = project_key_roll(actor=request.user, key=key, **serializer.validated_data)
            return key

        response = self.write_object(key, roll, activity="rolled")
        response.data = {**response.data, "key": shown["key"]}
        return response
