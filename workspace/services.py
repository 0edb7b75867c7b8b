"""Cross-app writes: the activity log that every API write records."""

import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from workspace.models import ActivityLog


def snapshot(instance: models.Model, exclude: frozenset[str] = frozenset()) -> dict:
    """A JSON-safe dict of the instance's concrete fields, for before/after states in the activity log."""
    values = {
        field.attname: getattr(instance, field.attname)
        for field in instance._meta.concrete_fields
        if field.name not in exclude and field.attname not in exclude
    }
    return json.loads(json.dumps(values, cls=DjangoJSONEncoder))


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
    """Record one write. `api_key` is the key that made it, or None for a session."""
    return ActivityLog.objects.create(
        user=user if user is not None and user.is_authenticated else None,
        api_key_mask=getattr(api_key, "mask_value", "") or "",
        organization_id=organization_id,
        project_id=project_id,
        scope=scope,
        item_id=str(item_id),
        activity=activity,
        detail={"name": name, "before": before, "after": after},
    )
