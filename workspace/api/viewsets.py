"""The base viewset and its mixins: the one write path every API write goes through.

A write request runs in one transaction that an error response rolls back. An update reads its row under a
lock (`SELECT ... FOR UPDATE`), checks `If-Match`, hands only the fields that changed to the viewset's hook
(which calls the app's service), records exactly one activity entry when the representation changed, and
answers with the new representation and its `ETag`. Views never lock, snapshot or log by hand.

This module knows no app: who may see what, and where activity is recorded, come from the subclasses in
`organizations/tenancy.py`.
"""

from collections.abc import Callable

from django.db import models, transaction
from django.template.response import SimpleTemplateResponse
from rest_framework import mixins, status, viewsets
from rest_framework.generics import get_object_or_404
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response

from workspace.api.conditional import check_if_match, etag_for, none_match
from workspace.api.serializers import read_queryset
from workspace.services import VOLATILE_FIELDS, diff, full_clean_changed

_MISSING = object()


def changed_fields(instance, data: dict) -> dict:
    """The validated fields whose value differs from the instance's; input that is not an attribute counts as given."""
    changes = {}
    for name, value in data.items():
        current = getattr(instance, name, _MISSING)
        if current is _MISSING or current != value:
            changes[name] = value
    return changes


class BaseViewSet(viewsets.GenericViewSet):
    """Every API viewset: its scope declaration and the one write path.

    `scope_object` gives `<object>:read` for list/retrieve and `<object>:write` for the other standard actions;
    a custom action passes `required_scopes=[...]` (and `writes_on_read=True` for a GET that writes) to
    `@action`: DRF accepts only keywords that exist as class attributes, so both are defined here.

    Subclasses say how to create, change and delete through `create_object`, `update_object` and
    `destroy_object` (each calls the app's service with `actor=`), and implement `record_activity`.
    """

    scope_object: str | None = None
    required_scopes: list[str] | None = None
    writes_on_read = False
    # Writes that must not run inside the request's transaction (see `dispatch`): True for every write of the view, or
    # the actions that must not. A request that waits on something other than the database (DNS, a destination) or
    # computes for long (a query) would hold that transaction, and its locks, all along. A view that sets it says why
    # in its docstring.
    outside_transaction: bool | frozenset[str] = False
    # PUT (a full update: required fields required) is offered alongside PATCH wherever an object is updated, as the
    # reference API's generated clients call it for every `update`.
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]
    # The serializer of the object's representation (responses, ETag, activity); default: `serializer_class`.
    object_serializer_class = None
    activity_ignored_fields: frozenset[str] = VOLATILE_FIELDS

    def dispatch(self, request, *args, **kwargs):
        """Run every write in one transaction: the change, its side rows and its activity entry land together,
        and a request that ends in an error response leaves no trace. A write the view declares
        `outside_transaction` runs without it."""
        action = self.action_map.get(request.method.lower())  # DRF sets `self.action` later, once inside
        if (request.method in SAFE_METHODS and not self.writes_on_read) or self.runs_outside_transaction(action):
            return super().dispatch(request, *args, **kwargs)
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)
            if response.status_code >= 400:
                transaction.set_rollback(True)
            return response

    def runs_outside_transaction(self, action: str | None) -> bool:
        """Whether the view declares the action `outside_transaction`."""
        outside = self.outside_transaction
        return outside is True or (bool(outside) and action in outside)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, SimpleTemplateResponse):  # DRF's Response: rendered once the view has returned
            response.add_post_render_callback(self._forget_response)
        return response

    def _forget_response(self, response) -> None:
        """Once the response is rendered, neither this view nor the renderer context refers to it any more: DRF
        leaves it in reference cycles (view.response, renderer_context["response"]) which only the cycle collector
        frees, and with it the page's data, the bulk of what a request allocates. Freed as soon as the server lets
        the response go, a page's memory is reused by the next request rather than piled up until a collection,
        which then takes tens of milliseconds of every thread of the process."""
        self.__dict__.pop("response", None)
        context = getattr(response, "renderer_context", None)
        if context is not None:
            context.pop("response", None)

    def options(self, request, *args, **kwargs):
        """The route's description; on a detail route a 404 for an object the caller cannot see, as a GET answers
        (DRF describes any id)."""
        lookup = self.lookup_url_kwarg or self.lookup_field
        if lookup in self.kwargs:
            self.check_object_exists()
        return super().options(request, *args, **kwargs)

    def check_object_exists(self) -> None:
        """A 404 unless the detail route's object is one the caller can see; reads only whether it exists (no
        representation, no lock)."""
        lookup = self.lookup_url_kwarg or self.lookup_field
        value = self.lookup_value(self.kwargs[lookup])
        get_object_or_404(self.filter_queryset(self.get_queryset()).values("pk"), **{self.lookup_field: value})

    @property
    def is_write(self) -> bool:
        """Whether this request changes rows, and so locks what it reads. OPTIONS describes the writes a route takes
        (DRF reads the object as a PUT would, to check its permissions) without making one: no lock. A write outside
        the request's transaction locks only what it reads inside a transaction of its own: a lock taken with none
        open would end with its statement."""
        if self.action == "metadata":
            return False
        if self.runs_outside_transaction(self.action) and not transaction.get_connection().in_atomic_block:
            return False
        return self.request.method not in SAFE_METHODS or self.writes_on_read

    # Lookup

    def lookup_value(self, value: str):
        """The lookup value from the URL; override to resolve aliases such as `@me`."""
        return value

    def read_queryset(self, queryset=None, serializer_class=None):
        """`get_queryset()` (or `queryset`) with the related rows its representation reads, derived from the
        serializer (workspace.api.serializers.read_queryset): the one read of every list page, detail and write
        answer."""
        if queryset is None:
            queryset = self.get_queryset()
        return read_queryset(serializer_class or self.get_object_serializer_class(), queryset)

    def get_object(self):
        """The object of a detail route: a 404 when the caller cannot see it, its object permissions checked,
        and for a write, read under a row lock with its `If-Match` precondition checked."""
        queryset = self.read_queryset()
        if self.is_write:
            self.lock_for_write()
            queryset = queryset.select_for_update(of=("self",))
        lookup_url_kwarg = self.lookup_url_kwarg or self.lookup_field
        value = self.lookup_value(self.kwargs[lookup_url_kwarg])
        instance = get_object_or_404(queryset, **{self.lookup_field: value})
        self.check_object_permissions(self.request, instance)
        if self.request.method not in SAFE_METHODS and "If-Match" in self.request.headers:
            check_if_match(self.request, etag_for(self.etag_state(self.represent(instance))))
        return instance

    def check_input_permissions(self, data, instance=None) -> None:
        """Ask each permission that judges what a write asks for (`has_input_permission(request, view, data, obj)`,
        `data` the serializer's validated input, `obj` the object or None on create) once the input is valid: bad
        input is a 400 naming its field before any rule about its value is a 403. Permissions never read the body."""
        for permission in self.get_permissions():
            judge = getattr(permission, "has_input_permission", None)
            if judge is not None and not judge(self.request, self, data, instance):
                self.permission_denied(self.request, message=getattr(permission, "message", None))

    def lock_for_write(self) -> None:
        """Take locks a write needs before its object's own (a parent row whose children share a rule)."""

    def refetch(self, instance):
        """The instance read again as a read gives it, so annotations and related rows reflect the write."""
        return self.read_queryset().get(pk=instance.pk)

    # Representation

    def get_object_serializer_class(self):
        return self.object_serializer_class or type(self).serializer_class

    def represent(self, instance) -> dict:
        serializer_class = self.get_object_serializer_class()
        return serializer_class(instance, context=self.get_serializer_context()).data

    def object_response(self, instance=None, *, data=None, status_code: int = status.HTTP_200_OK) -> Response:
        """The object's representation with its ETag; 304 for a GET whose If-None-Match names that tag."""
        if data is None:
            data = self.represent(instance)
        etag = self.etag_of(data)
        header = self.request.headers.get("If-None-Match")
        if self.request.method in ("GET", "HEAD") and header is not None and none_match(header, etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        return Response(data, status=status_code, headers={"ETag": etag})

    # The write path

    def get_save_kwargs(self) -> dict:
        """What the URL contributes to a new record (its organization or project)."""
        return {}

    def create_object(self, data: dict) -> models.Model:
        """Create the record from validated input; override to call the app's service."""
        model = self.get_queryset().model
        instance = model(**self.get_save_kwargs(), **data)
        instance.full_clean()
        instance.save()
        return instance

    def update_object(self, instance: models.Model, changes: dict) -> models.Model:
        """Apply the changed fields (never empty); override to call the app's service."""
        for name, value in changes.items():
            setattr(instance, name, value)
        full_clean_changed(instance, changes)
        auto_now = [field.name for field in instance._meta.concrete_fields if getattr(field, "auto_now", False)]
        instance.save(update_fields=[*changes, *auto_now])
        return instance

    def destroy_object(self, instance: models.Model) -> None:
        """Delete the record; override to call the app's service."""
        instance.delete()

    def activity_state(self, instance, representation: dict) -> dict:
        """What the activity log compares and keeps of a record: its representation, unless a subclass adds to it
        (a digest of secrets the representation hides, so that rotating one is recorded without revealing it)."""
        return representation

    def etag_of(self, representation: dict) -> str:
        """The ETag a response with this representation carries: the digest of its `etag_state`, unless a subclass
        adds to it what is computed rather than stored (`with_computed`: a dashboard's tiles' results)."""
        return etag_for(self.etag_state(representation))

    def etag_state(self, representation: dict) -> dict:
        """What an ETag is the digest of: the representation, unless a subclass leaves out what is computed rather
        than stored (an insight's result), which neither changes the object nor makes an `If-Match` stale."""
        return representation

    def record_activity(self, instance, activity: str, *, before: dict | None, after: dict | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement record_activity (see organizations.tenancy).")

    def record_change(self, instance, activity: str, *, before: dict | None, after: dict | None) -> None:
        """Record one activity entry, or none when an update changed nothing a client can see."""
        if before is not None and after is not None:
            before, after = diff(before, after, self.activity_ignored_fields)
            if not before and not after:
                return
        self.record_activity(instance, activity, before=before, after=after)

    def write_object(
        self, instance, change: Callable[[models.Model], object], *, activity: str = "updated"
    ) -> Response:
        """Apply `change` (a service call) to a locked instance and answer with its new representation, recording
        one entry if the representation changed. `change` may return the changed instance; other results are
        ignored."""
        before = self.activity_state(instance, self.represent(instance))
        result = change(instance)
        instance = self.refetch(result if isinstance(result, models.Model) else instance)
        after = self.represent(instance)
        self.record_change(instance, activity, before=before, after=self.activity_state(instance, after))
        return self.object_response(data=after)

    def record_created(self, instance) -> dict:
        """Record a new record; returns its representation."""
        instance = self.refetch(instance)
        after = self.represent(instance)
        self.record_change(instance, "created", before=None, after=self.activity_state(instance, after))
        return after

    def created_response(self, instance, *, status_code: int = status.HTTP_201_CREATED) -> Response:
        """Record a new record and answer with its representation and ETag."""
        return self.object_response(data=self.record_created(instance), status_code=status_code)


class ListMixin(mixins.ListModelMixin):
    """GET on the collection, paginated: a page of `read_queryset()` through the list's serializer."""

    def list(self, request, *args, **kwargs):
        serializer_class = self.get_serializer_class()
        queryset = self.filter_queryset(self.read_queryset(serializer_class=serializer_class))
        page = self.paginate_queryset(queryset)
        context = self.get_serializer_context()
        if page is None:  # a plain array (pagination_class = None)
            return Response(serializer_class(queryset, many=True, context=context).data)
        return self.get_paginated_response(serializer_class(page, many=True, context=context).data)


class CreateMixin:
    """POST on the collection: validate, create through `create_object`, record, answer 201 with the ETag."""

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.check_input_permissions(serializer.validated_data)
        return self.created_response(self.create_object(serializer.validated_data))


class RetrieveMixin:
    """GET on the object, with its ETag (and 304 for a matching If-None-Match)."""

    def retrieve(self, request, *args, **kwargs):
        return self.object_response(self.get_object())


class UpdateMixin:
    """PUT and PATCH on the object. PUT validates a whole representation (required fields must be there), PATCH only
    what is sent; either way only the fields that changed reach `update_object`, and a no-op records nothing."""

    def update(self, request, *args, partial: bool = False, **kwargs):
        instance = self.get_object()
        serializer = self.get_serializer(instance, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        self.check_input_permissions(serializer.validated_data, instance)
        changes = changed_fields(instance, serializer.validated_data)
        if not changes:
            # Nothing reaches a service: the answer is the object as read under the lock, and nothing is recorded.
            return self.object_response(instance)
        return self.write_object(instance, lambda obj: self.update_object(obj, changes))

    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, partial=True, **kwargs)


class DestroyMixin:
    """DELETE on the object through `destroy_object`; the deletion is recorded with the last representation."""

    def destroy(self, request, *args, **kwargs):
        instance = self.get_object()
        before = self.activity_state(instance, self.represent(instance))
        pk = instance.pk
        self.destroy_object(instance)
        instance.pk = pk  # Django clears it on delete; the activity entry needs it
        self.record_change(instance, "deleted", before=before, after=None)
        return Response(status=status.HTTP_204_NO_CONTENT)
