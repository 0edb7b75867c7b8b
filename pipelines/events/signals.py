"""Receivers that keep the pipelines app's rows in step with what happens below it.

A project's events and their definitions are deleted with it here, each table in one statement: Django's cascade
would load every event before deleting it (and list them all on admin's confirmation page), and a project may hold
millions.
`project_delete` (organizations) cannot do it itself: it knows no app above it.
"""

from django.db.models.signals import pre_delete
from django.dispatch import receiver

from organizations.models import Project
from pipelines.events.models import Event, EventDefinition, EventProperty, EventUUID, PropertyDefinition
from pipelines.events.partitions import events_ensure_partitions_ahead, is_partitioned


@receiver(pre_delete, sender=Project)
def delete_project_events(sender, instance: Project, using: str, **kwargs) -> None:
    Event.objects.using(using).filter(project_id=instance.pk).delete()
    EventUUID.objects.using(using).filter(project_id=instance.pk).delete()
    for definitions in (EventDefinition, PropertyDefinition, EventProperty):
        definitions.objects.using(using).filter(project_id=instance.pk).delete()


def create_event_partitions_after_migrate(sender, using: str, **kwargs) -> None:
    """Every `migrate` leaves the events table with its partitions for this month and the next ones."""
    if using == "default" and is_partitioned():
        events_ensure_partitions_ahead()
