"""Failures that are noticed, executed by a real Temporal and worker (tests/pipelines/temporal/conftest.py): an HTTP
destination that refuses the events fails its runs, the export pauses itself, a webhook receiver on 127.0.0.1 gets
signed run_failed, paused and recovered posts (retried while it fails), and the organization's admins get one mail a
day."""

import datetime as dt
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from organizations.models import Membership
from pipelines.batch_exports.models import BatchExport, BatchExportNotification
from pipelines.batch_exports.temporal.inputs import interval_end
from tests.conftest import persona
from tests.pipelines.temporal.conftest import wait_until
from tests.pipelines.temporal.test_orchestration import (
    HOUR,
    backfill,
    capture,
    describe_schedule,
    export_url,
    exports_url,
    finished,
    hourly_events,
)
from workspace.models import ActivityLog


class Receiver:
    """An HTTP server on 127.0.0.1: `/capture/ok` takes events (200), `/capture/bad` refuses them (400), `/hook`
    answers the statuses of `hook_plan` in turn (then 200) and keeps every request it got."""

    def __init__(self):
        self.hook_plan: list[int] = []
        self.hooks: list[dict] = []
        self.captured = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.startswith("/capture/"):
                    status = 200 if self.path == "/capture/ok" else 400
                    with receiver.lock:
                        receiver.captured += status == 200
                else:
                    with receiver.lock:
                        status = receiver.hook_plan.pop(0) if receiver.hook_plan else 200
                        receiver.hooks.append(
                            {
                                "signature": self.headers.get("X-Workspace-Signature"),
                                "body": body.decode(),
                                "status": status,
                            }
                        )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self, event: str) -> list[dict]:
        """The documents of `event` the hook took (answered 2xx)."""
        with self.lock:
            hooks = list(self.hooks)
        documents = [json.loads(hook["body"]) for hook in hooks if hook["status"] == 200]
        return [document for document in documents if document["event"] == event]


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def verified(hook: dict, secret: str) -> bool:
    """The receiver's check: the digest of `<t>.<body>` under the secret, and a recent `t`."""
    fields = dict(part.split("=", 1) for part in hook["signature"].split(","))
    expected = hmac.new(secret.encode(), f"{fields['t']}.{hook['body']}".encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"]) and abs(time.time() - int(fields["t"])) < 300


def create_watched_export(client, project, receiver, *, capture_path: str = "/capture/bad", email: bool = True):
    body = {
        "name": "Watched",
        "interval": "hour",
        "destination": {"type": "HTTP", "config": {"url": receiver.url + capture_path, "token": "phc_receiver"}},
        "notifications": {"webhook_url": receiver.url + "/hook", "email": email},
    }
    response = client.post(exports_url(project), body, format="json")
    assert response.status_code == 201, response.content
    return BatchExport.objects.get(pk=response.json()["id"]), response.json()["notifications"]["webhook_secret"]


def test_failing_runs_pause_the_export_and_a_fixed_one_recovers_with_signed_posts_and_one_mail(
    temporal, receiver, api_client, project, organization, settings
):
    settings.BATCH_EXPORT_AUTO_PAUSE_AFTER = 2
    persona("admin@example.com", "Ada", organization, project, Membership.Level.ADMIN)
    persona("member@example.com", "Mo", organization, project, Membership.Level.MEMBER)
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 2, [2, 3]))
    export, secret = create_watched_export(api_client, project, receiver)
    end = interval_end(now, HOUR)

    failed = finished(backfill(api_client, project, export, end - 2 * HOUR, end))

    assert failed.status == "Failed"
    assert sorted(failed.runs.values_list("status", flat=True)) == ["Failed", "Failed"]
    wait_until(lambda: receiver.delivered("paused") and len(receiver.delivered("run_failed")) == 2, 60)
    detail = api_client.get(export_url(project, export.pk)).json()
    assert (detail["paused"], detail["paused_reason"]) == (True, "failures")
    assert describe_schedule(export.pk).schedule.state.paused is True
    assert all(verified(hook, secret) for hook in receiver.hooks)
    (paused,) = receiver.delivered("paused")
    assert paused["batch_export"] == {"id": str(export.pk), "name": "Watched"}
    assert paused["run"]["status"] == "Failed" and "400" in paused["run"]["latest_error"]
    assert {document["run"]["id"] for document in receiver.delivered("run_failed")} == {
        str(run.pk) for run in failed.runs.all()
    }
    entry = ActivityLog.objects.get(item_id=str(export.pk), activity="paused")
    assert entry.user is None and entry.detail["after"]["paused_reason"] == "failures"
    # Two failures and a pause, one mail: to the admins and owners only.
    wait_until(lambda: not BatchExportNotification.objects.filter(email_status="pending").exists(), 30)
    assert len(mail.outbox) == 1
    assert sorted(mail.outbox[0].to) == ["admin@example.com", "alice@example.com"]
    assert "Watched" in mail.outbox[0].subject and secret not in mail.outbox[0].body

    fixed = api_client.patch(
        export_url(project, export.pk),
        {"destination": {"type": "HTTP", "config": {"url": receiver.url + "/capture/ok"}}},
        format="json",
    )
    assert fixed.status_code == 200, fixed.content
    # The pause lasted two whole intervals.
    BatchExport.objects.filter(pk=export.pk).update(last_paused_at=end - 2 * HOUR + dt.timedelta(minutes=5))
    resumed = api_client.post(f"{export_url(project, export.pk)}unpause/", {"backfill": True}, format="json")
    assert resumed.status_code == 200, resumed.content
    assert (resumed.json()["paused"], resumed.json()["paused_reason"]) == (False, None)
    assert describe_schedule(export.pk).schedule.state.paused is False
    missed = export.backfills.exclude(pk=failed.pk).get()
    assert (missed.start_at, missed.end_at) == (end - 2 * HOUR, end)

    assert finished(missed).status == "Completed"
    wait_until(lambda: receiver.delivered("recovered"), 60)
    time.sleep(1)  # a second recovery, were there one, would be posted by now
    (recovered,) = receiver.delivered("recovered")
    assert recovered["run"]["status"] == "Completed"
    assert all(verified(hook, secret) for hook in receiver.hooks)
    assert receiver.captured == 2  # one batch per interval, once the destination took them
    assert ActivityLog.objects.filter(item_id=str(export.pk), activity="recovered", user=None).count() == 1
    assert len(mail.outbox) == 1  # recovery is not mailed
    assert BatchExport.objects.get(pk=export.pk).paused is False


def test_a_receiver_that_fails_twice_gets_the_post_on_the_third_attempt(
    temporal, receiver, api_client, project, settings
):
    receiver.hook_plan = [500, 503]
    export, secret = create_watched_export(api_client, project, receiver, email=False)
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 1, [1]))
    end = interval_end(now, HOUR)

    assert finished(backfill(api_client, project, export, end - HOUR, end)).status == "Failed"

    wait_until(lambda: receiver.delivered("run_failed"), 60)
    notification = BatchExportNotification.objects.get()
    wait_until(lambda: BatchExportNotification.objects.get().webhook_status == "delivered", 10)
    notification.refresh_from_db()
    assert [(attempt["channel"], attempt["outcome"]) for attempt in notification.attempts] == [
        ("webhook", "failed"),
        ("webhook", "failed"),
        ("webhook", "delivered"),
    ]
    assert "500" in notification.attempts[0]["detail"] and "503" in notification.attempts[1]["detail"]
    assert [hook["status"] for hook in receiver.hooks] == [500, 503, 200]
    assert len({hook["body"] for hook in receiver.hooks}) == 1  # the same document each time, signed anew
    assert all(verified(hook, secret) for hook in receiver.hooks)
    assert BatchExport.objects.get(pk=export.pk).paused is False  # one failure of five


def test_a_receiver_that_refuses_is_not_tried_again(temporal, receiver, api_client, project):
    receiver.hook_plan = [410]
    export, _ = create_watched_export(api_client, project, receiver, email=False)
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 1, [1]))
    end = interval_end(now, HOUR)

    finished(backfill(api_client, project, export, end - HOUR, end))

    wait_until(lambda: BatchExportNotification.objects.filter(webhook_status="failed").exists(), 60)
    time.sleep(2)  # a retry would have come after one second
    assert [hook["status"] for hook in receiver.hooks] == [410]
    assert len(BatchExportNotification.objects.get().attempts) == 1


def test_a_private_webhook_is_refused_unless_allowed(temporal, receiver, api_client, project, settings):
    export, _ = create_watched_export(api_client, project, receiver, email=False)
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = False
    end = interval_end(timezone.now(), HOUR)

    # The destination is refused as well, which fails the run.
    assert finished(backfill(api_client, project, export, end - HOUR, end)).status == "Failed"

    wait_until(lambda: BatchExportNotification.objects.filter(webhook_status="failed").exists(), 60)
    (attempt,) = BatchExportNotification.objects.get().attempts
    assert "private" in attempt["detail"] and attempt["outcome"] == "failed"
    assert receiver.hooks == []
