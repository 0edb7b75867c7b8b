"""The base viewset and its mixins: the one write path every API write goes through.

A write request runs in one transaction that an error response rolls back. An update reads its row under a
lock (`SELECT ... FOR UPDATE`), checks `If-Match`, hands only the fields that changed to the viewset's hook
(which calls the app's service), records exactly one activity entry when the representation changed, and
answers with the new representation and its `ETag`. Views never lock, snapshot or log by hand.

The answer to a change is read once more, as far as the change can have altered it: the row always (what the
database made of the values, and its annotations), and of the related rows read with it under the lock only those
a table the change wrote decides (`TablesWritten`, `read_again`); the others were read in this transaction, after
the lock, and nothing the change did reached them, in the database or in memory (they are taken off the object
before the change runs).

This module knows no app: who may see what, and where activity is recorded, come from the subclasses in
`organizations/tenancy.py`.
"""

import re
from collections.abc import Callable
from contextlib import ExitStack

from django.core.exceptions import EmptyResultSet, FieldDoesNotExist
from django.db import connections, models, transaction
from django.db.models import Prefetch, prefetch_related_objects
from django.db.models.constants import LOOKUP_SEP
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


# The table an INSERT, UPDATE or DELETE writes, named as Django names it (a name followed by anything but a space or a
# parenthesis, such as a schema's, is no match).
_WRITE = re.compile(r'\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(\w+)"?(?=[\s(])', re.IGNORECASE)
# Statements that change no row: reads (row locks included) and savepoints.
_NO_WRITE = re.compile(r"\s*(?:SELECT|SAVEPOINT|RELEASE\s+SAVEPOINT|ROLLBACK\s+TO\s+SAVEPOINT)\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")


class TablesWritten:
    """While entered, the tables written by the statements this thread sends on any of its connections, seen as they
    go (Django's execute wrappers): an INSERT, UPDATE or DELETE writes the table it names, a read or a savepoint
    none, and any other statement (a data-modifying WITH, DDL, raw SQL of another shape) counts as writing every
    table. The schema has no trigger, rule or foreign key acting by itself, and no code sends statements to this
    database through the driver's own cursor (a COPY, a stored procedure), which no wrapper would see: so a row
    changes only through a statement seen here naming its table (tests/workspace/test_write_path_reads.py checks
    both)."""

    def __init__(self):
        self.tables: set[str] = set()
        self.every_table = False
        self._wrappers = ExitStack()

    def __enter__(self):
        for connection in connections.all():
            self._wrappers.enter_context(connection.execute_wrapper(self))
        return self

    def __exit__(self, *exc_info):
        return self._wrappers.__exit__(*exc_info)

    def __call__(self, execute, sql, params, many, context):
        written = _WRITE.match(sql) if isinstance(sql, str) else None
        if written is not None:
            self.tables.add(written[1].lower())
        elif not (isinstance(sql, str) and _NO_WRITE.match(sql)):
            self.every_table = True
        return execute(sql, params, many, context)

    def __bool__(self) -> bool:
        """Whether anything was written."""
        return self.every_table or bool(self.tables)

    def decides(self, model: type[models.Model], lookup) -> bool:
        """Whether a written table may decide what a prefetch lookup of `model` attaches (yes, when which tables do
        is not known, unless nothing was written)."""
        if not self:
            return False
        tables = None if self.every_table else _lookup_tables(model, lookup)
        return tables is None or not self.tables.isdisjoint(tables)


def _tables_read(queryset: models.QuerySet) -> frozenset[str]:
    """Every word of the queryset's SQL: the tables it reads (quoted or not, joined or in a subquery) among them."""
    try:
        sql, _ = queryset.query.sql_with_params()
    except EmptyResultSet:  # a query that can match no row reads none
        return frozenset()
    return frozenset(word.lower() for word in _WORD.findall(sql))


def _path_tables(model: type[models.Model], path: str) -> tuple[frozenset[str], type[models.Model]] | None:
    """The tables that decide which rows a prefetch along `path` (`a__b`) gives each object of `model`, and the model
    it ends on: a foreign key's table (its column) and its target's, a reverse relation's table, a many-to-many's and
    its through table's; None for a step that is no such relation (a generic foreign key, a property)."""
    tables = set()
    for name in path.split(LOOKUP_SEP):
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            return None
        related = field.related_model if field.is_relation else None
        if related is None or isinstance(related, str):
            return None
        if field.many_to_many:
            through = getattr(field, "through", None) or field.remote_field.through
            tables.add(through._meta.db_table)
        elif field.concrete and (field.many_to_one or field.one_to_one):
            tables.add(model._meta.db_table)
        elif not (field.one_to_many or field.one_to_one):
            return None
        tables.add(related._meta.db_table)
        model = related
    return frozenset(table.lower() for table in tables), model


def _attaches(lookup) -> bool:
    """Whether a prefetch lookup puts its rows in an attribute of their object (a `Prefetch` with `to_attr`), where
    they can be taken off and put back; a string lookup, or one without `to_attr`, fills a related manager's cache."""
    return isinstance(lookup, Prefetch) and bool(lookup.to_attr)


def _lookup_tables(model: type[models.Model], lookup) -> frozenset[str] | None:
    """The tables that decide what a prefetch lookup of `model` attaches: its path's and those its queryset reads;
    None when not known."""
    if not _attaches(lookup):
        return None
    path = _path_tables(model, lookup.prefetch_through)
    if path is None:
        return None
    tables, end = path
    queryset = lookup.queryset if lookup.queryset is not None else end._default_manager.all()
    return tables | _tables_read(queryset)


class _ReadAgain(Exception):  # noqa: N818 - not an error: rows kept from before a change cannot be vouched for
    pass


def _holders(objects: list, lookup: Prefetch) -> list:
    """The objects a nested lookup's rows hang on: `objects` themselves, or the related objects its path goes
    through first, each one already read (a foreign key joined or prefetched); anything else cannot be told."""
    model = type(objects[0]) if objects else None
    holders = objects
    for name in lookup.prefetch_through.split(LOOKUP_SEP)[:-1]:
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            raise _ReadAgain from None
        if not (field.concrete and (field.many_to_one or field.one_to_one)):
            raise _ReadAgain
        reached = []
        for holder in holders:
            if field.is_cached(holder):
                related = field.get_cached_value(holder)
            elif getattr(holder, field.attname) is None:
                related = None
            else:
                raise _ReadAgain
            if related is not None:
                reached.append(related)
        holders, model = reached, field.related_model
    return holders


def _rows(value) -> list:
    """A prefetch's result as a list: its rows, or the one row of a single relation."""
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def _refresh(objects: list, queryset: models.QuerySet | None, written: TablesWritten) -> None:
    """On rows kept from before a change, read again each nested lookup of `queryset` (the one that read them) that a
    written table decides, and look the same way inside the rows of those kept. _ReadAgain when a lookup's rows
    cannot be told apart (the caller then reads the whole relation again)."""
    if queryset is None or not objects:
        return
    for lookup in queryset._prefetch_related_lookups:
        if not _attaches(lookup):
            raise _ReadAgain
        holders = _holders(objects, lookup)
        if any(lookup.to_attr not in holder.__dict__ for holder in holders):
            raise _ReadAgain  # not read with them: no rows to keep
        if written.decides(queryset.model, lookup):
            for holder in holders:
                del holder.__dict__[lookup.to_attr]
            prefetch_related_objects(objects, lookup)
        else:
            kept = [row for holder in holders for row in _rows(holder.__dict__[lookup.to_attr])]
            _refresh(kept, lookup.queryset, written)


def _detachable(queryset: models.QuerySet) -> list[Prefetch]:
    """The lookups of `queryset` whose rows hang on an attribute of the object itself."""
    return [
        lookup
        for lookup in queryset._prefetch_related_lookups
        if _attaches(lookup) and LOOKUP_SEP not in lookup.prefetch_through
    ]


def detach_related(instance: models.Model, queryset: models.QuerySet) -> dict:
    """Take off `instance` the related rows `queryset` (the read that gave it) attached to it, so that a change given
    the instance cannot reach them; `read_again` puts back those the change left as they were."""
    return {
        lookup.to_attr: instance.__dict__.pop(lookup.to_attr)
        for lookup in _detachable(queryset)
        if lookup.to_attr in instance.__dict__
    }


def read_again(queryset: models.QuerySet, pk, detached: dict, written: TablesWritten) -> models.Model:
    """The object `pk` after a change, read through `queryset` (a fresh `read_queryset()`): its row (with its joins
    and annotations) read again; each related relation read again if a table the change wrote decides it, else the
    rows `detach_related` took before the change put back, with those of their own relations that a written table
    decides read again."""
    row = queryset.prefetch_related(None).get(pk=pk)
    detachable = _detachable(queryset)
    again = []
    for lookup in queryset._prefetch_related_lookups:
        if lookup not in detachable or lookup.to_attr not in detached or written.decides(queryset.model, lookup):
            again.append(lookup)
            continue
        rows = detached[lookup.to_attr]
        try:
            _refresh(_rows(rows), lookup.queryset, written)
        except _ReadAgain:
            again.append(lookup)
            continue
        row.__dict__[lookup.to_attr] = rows
    if again:
        prefetch_related_objects([row], *again)
    return row


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
    # PUT (a full update: required fields required) is offered alongside PATCH wherever an object is updated, as the
    # reference API's generated clients call it for every `update`.
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]
    # The serializer of the object's representation (responses, ETag, activity); default: `serializer_class`.
    object_serializer_class = None
    activity_ignored_fields: frozenset[str] = VOLATILE_FIELDS

    def dispatch(self, request, *args, **kwargs):
        """Run every write in one transaction: the change, its side rows and its activity entry land together,
        and a request that ends in an error response leaves no trace."""
        if request.method in SAFE_METHODS and not self.writes_on_read:
            return super().dispatch(request, *args, **kwargs)
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)
            if response.status_code >= 400:
                transaction.set_rollback(True)
            return response

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
        (DRF reads the object as a PUT would, to check its permissions) without making one: no lock."""
        if self.action == "metadata":
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
        if self.is_write:
            self._locked = instance  # its related rows were read in this transaction, after the lock
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
        etag = etag_for(self.etag_state(data))
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
        queryset = self.read_queryset()
        locked = instance is getattr(self, "_locked", None)
        detached = detach_related(instance, queryset) if locked else {}
        with TablesWritten() as written:
            result = change(instance)
        changed = result if isinstance(result, models.Model) else instance
        if locked and type(changed) is type(instance) and changed.pk == instance.pk:
            instance = read_again(queryset, changed.pk, detached, written)
        else:
            instance = self.refetch(changed)
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
