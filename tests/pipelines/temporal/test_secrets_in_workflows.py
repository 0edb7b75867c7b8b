"""A destination's secret goes from the database to the export activity and on to the destination, and never through
Temporal: the workflows and activities pass ids, so no workflow history holds it."""

import base64
import binascii
import json

from django.utils import timezone

from pipelines.batch_exports.temporal.inputs import interval_end
from pipelines.events.models import Event
from pipelines.temporal.client import call
from tests.pipelines.temporal.test_orchestration import HOUR, backfill, capture, create_export, finished, hourly_events
from tests.pipelines.test_secrets import stored_text


def history_text(workflow_id: str) -> str:
    """The workflow's history as text, each payload decoded (Temporal's JSON keeps payloads in base64)."""
    history = call(lambda client: client.get_workflow_handle(workflow_id).fetch_history())
    parts: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "data" and isinstance(item, str):
                    try:
                        parts.append(base64.b64decode(item, validate=True).decode(errors="replace"))
                    except binascii.Error:
                        pass
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str):
            parts.append(node)

    walk(json.loads(history.to_json()))
    return "\n".join(parts)


def test_a_secret_reaches_the_destination_and_no_workflow_history(
    temporal, live_service, api_client, project, other_project
):
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 1, [3]))
    token = other_project.api_token  # the capture endpoint takes the events only with the real token
    config = {"url": f"{live_service.url}/batch/", "token": token}
    export = create_export(api_client, project, {"type": "HTTP", "config": config})
    assert token not in stored_text(export.pk)
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - HOUR, end))

    run = done.runs.get()
    assert (done.status, run.status, run.records_completed) == ("Completed", "Completed", 3)
    assert Event.objects.filter(project=other_project).count() == 3
    for workflow_id in (done.workflow_id, run.workflow_id):
        history = history_text(workflow_id)
        assert str(run.pk) in history  # the payloads were read: the run's id travels in them
        assert token not in history
