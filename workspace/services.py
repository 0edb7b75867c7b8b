"""Cross-app writes: the activity log that every write records, from the API and from admin alike."""

import hashlib
import hmac
import json
from collections.abc import Collection

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from workspace.models import ActivityLog, acting_person

# Fields whose change alone is not a change worth recording (they move on every save).
VOLATILE_FIELDS = frozenset({"updated_at", "last_updated_at", "last_modified_at"})


def diff(before: dict, after: dict, ignored: frozenset[str]) -> tuple[dict, dict]:
    """The keys whose values differ, as two dicts (before, after)."""
    keys = [key for key in {**before, **after} if key not in ignored and before.get(key) != after.get(key)]
    return {key: before.get(key) for key in keys}, {key: after.get(key) for key in keys}


def full_clean_changed(instance: models.Model, changed: Collection[str]) -> None:
    """`full_clean()` for an update of the fields named in `changed`: every field's rules, uniqueness and
    constraints, except the existence of foreign keys that did not change (they were checked when stored, and
    each check is a query)."""
    unchanged = [field.name for field in instance._meta.fields if field.is_relation and field.name not in changed]
    instance.full_clean(exclude=unchanged, validate_unique=False, validate_constraints=False)
    instance.validate_unique()
    instance.validate_constraints()


def snapshot(instance: models.Model, exclude: frozenset[str] = frozenset()) -> dict:
    """A JSON-safe dict of the instance's concrete fields, for before/after states in the activity log."""
    values = {
        field.attname: getattr(instance, field.attname)
        for field in instance._meta.concrete_fields
        if field.name not in exclude and field.attname not in exclude
    }
    return json.loads(json.dumps(values, cls=DjangoJSONEncoder))


def secret_mask(value) -> str:
    """What the activity log keeps of a secret: a keyed digest. A changed secret still reads as a change, while
    the value, and anything that would help guess it without the server's SECRET_KEY, stays out of the log."""
    message = json.dumps(value, sort_keys=True, cls=DjangoJSONEncoder).encode()
    return "masked:" + hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()[:12]


def mask_secrets(values, secret_keys: Collection[str]):
    """A config object with the values of its secret keys masked; anything that is not an object is kept as is."""
    if not isinstance(values, dict):
        return values
    return {
        key: secret_mask(value) if key in secret_keys and value not in (None, "") else value
        for key, value in values.items()
    }


def activity_log_record(
    *,
    user,
    api_key,
    scope: str,
    item_id,
    activity: str,
    organization_id=None,
    project_id=None,
    name: str = "",
    before: dict | None = None,
    after: dict | None = None,
) -> ActivityLog:
    """Record one write. `api_key` is the key that made it, or None for a session; a project's key acts for no
    person (no `user`), and is named by its mask and label."""
    return ActivityLog.objects.create(
        user=acting_person(user),
        api_key_mask=getattr(api_key, "mask_value", "") or "",
        api_key_label=getattr(api_key, "label", "") or "",
        organization_id=organization_id,
        project_id=project_id,
        scope=scope,
        item_id=str(item_id),
        activity=activity,
        detail={"name": name, "before": before, "after": after},
    )


def activity_record_change(
    *,
    user,
    instance: models.Model,
    scope: str,
    activity: str,
    before: dict | None,
    after: dict | None,
    api_key=None,
    organization_id=None,
    project_id=None,
    ignored: frozenset[str] = VOLATILE_FIELDS,
    force: bool = False,
) -> ActivityLog | None:
    """Record one change of `instance` from its state before (None for a creation) and after (None for a
    deletion), keeping only the fields that differ. An update that changed nothing outside `ignored` records
    nothing, unless `force` says the write had an effect outside the row (a mail sent)."""
    if before is not None and after is not None:
        before, after = diff(before, after, ignored)
        if not before and not after and not force:
            return None
    return activity_log_record(
        user=user,
        api_key=api_key,
        scope=scope,
        item_id=instance.pk,
        activity=activity,
        organization_id=organization_id,
        project_id=project_id,
        name=str(getattr(instance, "name", "") or ""),
        before=before,
        after=after,
    )
