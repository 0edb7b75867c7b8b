"""Exports that pause themselves after failed runs in a row, their notification settings and signing secret, and
unpausing with a backfill of the missed intervals (DECISIONS.md §17), through the API, admin and the run-end
activity; Temporal unconfigured (its part is in tests/pipelines/temporal/test_notifications.py)."""

import datetime as dt
import hashlib
import hmac
import json

import pytest
from django.db.models import JSONField
from django.db.models.functions import Cast
from django.utils import timezone

from pipelines.batch_exports.models import BatchExport, BatchExportNotification, BatchExportRun
from pipelines.batch_exports.notifications import signature
from pipelines.batch_exports.temporal.activities import finish_run
from pipelines.batch_exports.temporal.inputs import FinishRunInputs, interval_end
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory
from workspace.models import ActivityLog

HOUR = dt.timedelta(hours=1)
NEW_EXPORT = {"name": "Watched", "destination": {"type": "NoOp", "config": {}}, "interval": "hour"}
HOOK = "https://hooks.example.com/exports"


def exports_url(project) -> str:
    return f"/api/projects/{project.pk}/batch_exports/"


def org_exports_url(organization) -> str:
    return f"/api/organizations/{organization.pk}/batch_exports/"


class TestNotificationSettings:
    def test_a_new_webhook_secret_is_shown_once_and_never_again(self, api_client, admin_client, project):
        response = api_client.post(
            exports_url(project), {**NEW_EXPORT, "notifications": {"webhook_url": HOOK, "email": True}}, format="json"
        )

        assert response.status_code == 201, response.content
        shown = response.json()["notifications"]
        secret = shown.pop("webhook_secret")
        assert secret.startswith("whsec_") and len(secret) > 30
        assert shown == {"webhook_url": HOOK, "email": True}
        export_id = response.json()["id"]
        detail = api_client.get(f"{exports_url(project)}{export_id}/")
        assert detail.json()["notifications"] == {"webhook_url": HOOK, "email": True}
        # The answer's ETag is the representation's: a conditional write with it goes through.
        assert detail["ETag"] == response["ETag"]
        renamed = api_client.patch(
            f"{exports_url(project)}{export_id}/", {"name": "Renamed"}, format="json", HTTP_IF_MATCH=response["ETag"]
        )
        assert renamed.status_code == 200 and "webhook_secret" not in renamed.json()["notifications"]
        pages = [
            api_client.get(exports_url(project)).content,
            api_client.get(f"{org_exports_url(project.organization)}{export_id}/").content,
            detail.content,
            renamed.content,
            admin_client.get(f"/admin/pipelines/batchexport/{export_id}/change/").content,
        ]
        assert all(secret.encode() not in page for page in pages)
        entries = json.dumps(list(ActivityLog.objects.values("detail")))
        assert "webhook_secret" in entries and secret not in entries
        # As stored: read past the field that decrypts it.
        stored = BatchExport.objects.filter(pk=export_id).values_list(Cast("notifications_secrets", JSONField()))
        assert "$fernet" in str(stored.get()) and secret not in str(stored.get())
        assert BatchExport.objects.get(pk=export_id).notifications_secrets == {"secret": secret}

    def test_a_webhook_set_later_shows_its_secret_then_keeps_it_until_removed(self, api_client, project):
        export_id = api_client.post(exports_url(project), NEW_EXPORT, format="json").json()["id"]
        url = f"{exports_url(project)}{export_id}/"

        first = api_client.patch(url, {"notifications": {"webhook_url": HOOK}}, format="json").json()
        moved = api_client.patch(url, {"notifications": {"webhook_url": HOOK + "/v2"}}, format="json").json()
        removed = api_client.patch(url, {"notifications": {"webhook_url": None}}, format="json").json()
        again = api_client.patch(url, {"notifications": {"webhook_url": HOOK}}, format="json").json()

        secret = first["notifications"]["webhook_secret"]
        assert "webhook_secret" not in moved["notifications"] and "webhook_secret" not in removed["notifications"]
        assert removed["notifications"] == {"webhook_url": None, "email": False}
        assert again["notifications"]["webhook_secret"] not in (None, secret)

    @pytest.mark.parametrize(
        "notifications",
        [{"webhook_url": "ftp://hooks.example.com/"}, {"webhook_url": "hooks.example.com"}, {"email": "often"}],
    )
    def test_bad_notification_settings_are_400_and_create_nothing(self, api_client, project, notifications):
        response = api_client.post(exports_url(project), {**NEW_EXPORT, "notifications": notifications}, format="json")

        assert response.status_code == 400
        assert response.json()["attr"].startswith("notifications")
        assert not BatchExport.objects.exists()

    def test_a_put_without_notifications_keeps_them(self, api_client, project):
        export_id = api_client.post(
            exports_url(project), {**NEW_EXPORT, "notifications": {"webhook_url": HOOK, "email": True}}, format="json"
        ).json()["id"]

        response = api_client.put(f"{exports_url(project)}{export_id}/", {**NEW_EXPORT, "name": "Put"}, format="json")

        assert response.status_code == 200
        assert response.json()["notifications"] == {"webhook_url": HOOK, "email": True}


class TestPausedReason:
    def test_a_manual_pause_says_so_and_unpausing_clears_it(self, api_client, project):
        export = BatchExportFactory(project=project)
        url = f"{exports_url(project)}{export.pk}/"

        paused = api_client.post(url + "pause/").json()
        resumed = api_client.post(url + "unpause/").json()
        patched = api_client.patch(url, {"paused": True}, format="json").json()

        assert (paused["paused"], paused["paused_reason"]) == (True, "manual")
        assert (resumed["paused"], resumed["paused_reason"]) == (False, None)
        assert patched["paused_reason"] == "manual"

    def test_paused_reason_is_read_only(self, api_client, project):
        export = BatchExportFactory(project=project)

        api_client.patch(f"{exports_url(project)}{export.pk}/", {"paused_reason": "failures"}, format="json")

        assert BatchExport.objects.get(pk=export.pk).paused_reason is None


def finish(run: BatchExportRun, status: str) -> list[str]:
    """End a run as a worker does (the activity itself, outside any workflow)."""
    return finish_run(FinishRunInputs(str(run.pk), status, latest_error=None if status == "Completed" else "boom"))


def starting_runs(export: BatchExport, hours: int) -> list[BatchExportRun]:
    end = interval_end(timezone.now(), HOUR)
    return [
        BatchExportRunFactory(
            batch_export=export,
            status="Running",
            data_interval_start=end - (hours - index) * HOUR,
            data_interval_end=end - (hours - index - 1) * HOUR,
        )
        for index in range(hours)
    ]


@pytest.mark.django_db(transaction=True)
class TestAutoPause:
    """The run-end activity opens and closes its own connection, hence committed rows."""

    def test_the_third_failure_in_a_row_pauses_the_export_and_records_why(self, project, settings):
        settings.BATCH_EXPORT_AUTO_PAUSE_AFTER = 3
        export = BatchExportFactory(project=project)
        runs = starting_runs(export, 4)

        finish(runs[0], "Failed")
        finish(runs[1], "FailedRetryable")
        assert BatchExport.objects.get(pk=export.pk).paused is False
        finish(runs[2], "Failed")
        finish(runs[3], "Failed")

        export = BatchExport.objects.get(pk=export.pk)
        assert (export.paused, export.paused_reason) == (True, "failures")
        assert export.last_paused_at is not None
        entries = list(ActivityLog.objects.filter(scope="BatchExport", item_id=str(export.pk), activity="paused"))
        assert len(entries) == 1
        assert entries[0].user is None
        assert entries[0].detail["after"]["paused_reason"] == "failures"
        assert entries[0].detail["after"]["failed_runs_in_a_row"] == 3

    def test_a_completed_run_between_failures_resets_the_count(self, project, settings):
        settings.BATCH_EXPORT_AUTO_PAUSE_AFTER = 2
        export = BatchExportFactory(project=project)
        runs = starting_runs(export, 3)

        finish(runs[0], "Failed")
        finish(runs[1], "Completed")
        finish(runs[2], "Failed")

        assert BatchExport.objects.get(pk=export.pk).paused is False
        recovered = ActivityLog.objects.filter(item_id=str(export.pk), activity="recovered")
        assert recovered.count() == 1 and recovered.get().user is None

    def test_failures_are_counted_by_interval_so_an_old_interval_failing_after_a_newer_success_does_not_pause(
        self, project, settings
    ):
        settings.BATCH_EXPORT_AUTO_PAUSE_AFTER = 2
        export = BatchExportFactory(project=project)
        older, newer = starting_runs(export, 2)
        newest_failure = starting_runs(export, 1)[0]
        newest_failure.data_interval_end += HOUR
        newest_failure.save()

        finish(newer, "Completed")
        finish(older, "Failed")
        finish(newest_failure, "Failed")

        assert BatchExport.objects.get(pk=export.pk).paused is False

    def test_a_cancelled_run_counts_for_nothing_and_notifies_no_one(self, project, settings):
        settings.BATCH_EXPORT_AUTO_PAUSE_AFTER = 1
        export = BatchExportFactory(
            project=project, notifications_webhook_url=HOOK, notifications_secrets={"secret": "s"}
        )
        (run,) = starting_runs(export, 1)

        assert finish(run, "Cancelled") == []
        assert BatchExport.objects.get(pk=export.pk).paused is False
        assert not BatchExportNotification.objects.exists()

    def test_mail_is_queued_once_a_day_and_the_webhook_hears_every_event(self, project, settings, alice):
        settings.BATCH_EXPORT_AUTO_PAUSE_AFTER = 2
        export = BatchExportFactory(
            project=project,
            notifications_webhook_url=HOOK,
            notifications_secrets={"secret": "s"},
            notifications_email=True,
        )
        runs = starting_runs(export, 3)

        ids = finish(runs[0], "Failed") + finish(runs[1], "Failed") + finish(runs[2], "Completed")

        notifications = {str(n.pk): n for n in BatchExportNotification.objects.all()}
        assert sorted(notifications) == sorted(ids)
        by_event = sorted((n.event, n.webhook_status, str(n.email_status)) for n in notifications.values())
        assert by_event == [
            ("paused", "pending", "None"),
            ("recovered", "pending", "None"),
            ("run_failed", "pending", "None"),
            ("run_failed", "pending", "pending"),
        ]
        body = json.loads(BatchExportNotification.objects.get(event="paused").body)
        assert body["event"] == "paused" and body["batch_export"] == {"id": str(export.pk), "name": export.name}
        assert body["run"]["id"] == str(runs[1].pk) and body["run"]["status"] == "Failed"
        assert BatchExport.objects.get(pk=export.pk).notifications_emailed_at is not None


class TestUnpauseWithBackfill:
    @pytest.mark.parametrize("route", ["project", "organization"])
    def test_unpause_with_backfill_creates_exactly_the_missed_intervals(self, api_client, project, route):
        now = timezone.now()
        paused_at = interval_end(now, HOUR) - 3 * HOUR + dt.timedelta(minutes=20)
        export = BatchExportFactory(project=project, paused=True, paused_reason="failures", last_paused_at=paused_at)
        base = exports_url(project) if route == "project" else org_exports_url(project.organization)

        response = api_client.post(f"{base}{export.pk}/unpause/", {"backfill": True}, format="json")

        assert response.status_code == 200, response.content
        assert (response.json()["paused"], response.json()["paused_reason"]) == (False, None)
        backfill = export.backfills.get()
        end = interval_end(timezone.now(), HOUR)
        assert (backfill.start_at, backfill.end_at) == (interval_end(paused_at, HOUR), end)
        intervals = list(backfill.runs.order_by("data_interval_start").values_list("data_interval_start", flat=True))
        assert intervals == [end - 3 * HOUR, end - 2 * HOUR, end - HOUR]

    def test_unpause_without_backfill_or_of_an_export_not_paused_backfills_nothing(self, api_client, project):
        paused = BatchExportFactory(project=project, paused=True, last_paused_at=timezone.now() - 5 * HOUR)
        running = BatchExportFactory(project=project)

        plain = api_client.post(f"{exports_url(project)}{paused.pk}/unpause/")
        idle = api_client.post(f"{exports_url(project)}{running.pk}/unpause/", {"backfill": True}, format="json")

        assert plain.status_code == idle.status_code == 200
        assert not paused.backfills.exists() and not running.backfills.exists()

    def test_a_pause_shorter_than_an_interval_backfills_nothing(self, api_client, project):
        export = BatchExportFactory(project=project, paused=True, last_paused_at=interval_end(timezone.now(), HOUR))

        response = api_client.post(f"{exports_url(project)}{export.pk}/unpause/", {"backfill": True}, format="json")

        assert response.status_code == 200 and not export.backfills.exists()

    def test_a_bad_body_is_400_and_leaves_the_export_paused(self, api_client, project):
        export = BatchExportFactory(project=project, paused=True, last_paused_at=timezone.now() - 5 * HOUR)

        response = api_client.post(
            f"{exports_url(project)}{export.pk}/unpause/", {"backfill": "yes please"}, format="json"
        )

        assert response.status_code == 400 and response.json()["attr"] == "backfill"
        assert BatchExport.objects.get(pk=export.pk).paused is True

    @pytest.mark.parametrize("route", ["project", "organization"])
    def test_unpause_needs_the_write_scope_and_another_tenants_export_is_not_found(
        self, key_client, project, other_project, route
    ):
        mine = BatchExportFactory(project=project, paused=True, last_paused_at=timezone.now() - 5 * HOUR)
        theirs = BatchExportFactory(project=other_project, paused=True, last_paused_at=timezone.now() - 5 * HOUR)
        if route == "project":
            mine_url = f"{exports_url(project)}{mine.pk}/unpause/"
            theirs_url = f"{exports_url(other_project)}{theirs.pk}/unpause/"
        else:
            mine_url = f"{org_exports_url(project.organization)}{mine.pk}/unpause/"
            theirs_url = f"{org_exports_url(other_project.organization)}{theirs.pk}/unpause/"
        body = {"backfill": True}

        assert key_client("batch_export:read").post(mine_url, body, format="json").status_code == 403
        assert key_client("batch_export:write").post(theirs_url, body, format="json").status_code == 404
        assert BatchExport.objects.filter(paused=True).count() == 2
        assert not mine.backfills.exists() and not theirs.backfills.exists()


def test_the_signature_is_hmac_sha256_of_the_time_and_body():
    expected = hmac.new(b"whsec_k", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()

    assert signature("whsec_k", 1700000000, '{"a":1}') == f"t=1700000000,v1={expected}"


@pytest.mark.parametrize("value", [0, 1, "true", None])
def test_unpause_backfill_takes_a_json_boolean_only(key_client, project, value):
    export = BatchExportFactory(project=project, paused=True)
    response = key_client("batch_export:write").post(
        f"/api/projects/{project.pk}/batch_exports/{export.pk}/unpause/", {"backfill": value}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["attr"] == "backfill"
