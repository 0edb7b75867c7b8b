"""Failures that are noticed (DECISIONS.md §17): an export's webhook and its organization's admins hear when a run
fails, when the export pauses itself and when a run completes after failures.

A notification is written to the outbox (`BatchExportNotification`) in the transaction that records the run's end
(`pipelines.batch_exports.services.batch_export_run_finished`), so it exists exactly when that end does. It is
delivered after the commit by the run workflow's last activity
(`pipelines.batch_exports.temporal.activities.deliver_notifications`), which Temporal retries with exponential backoff
while a channel is still pending: nothing is sent inside a transaction or under a lock, so a slow receiver holds up no
run, and every attempt and its outcome is kept on the row.

The webhook gets the JSON body signed with HMAC-SHA256 under the export's secret, in `X-Workspace-Signature:
t=<unix time>,v1=<hex digest of "<t>.<body>">`; the receiver recomputes the digest and may refuse an old `t`. Its
address passes the outbound safety of destinations (`pipelines.batch_exports.destinations.safety`) at each attempt. Mail
goes to the organization's admins and owners, at most once a day per export: whether a notification is mailed is
decided when it is written, under the export's lock, so two failures at once cannot both mail.
"""

import datetime as dt
import hashlib
import hmac
import http.client
import json
import secrets
import ssl
import time
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from organizations.models import Membership
from pipelines.batch_exports.destinations.base import DestinationError
from pipelines.batch_exports.destinations.http import _PinnedHTTPConnection, _PinnedHTTPSConnection
from pipelines.batch_exports.destinations.safety import check_destination_url
from pipelines.batch_exports.models import BatchExport, BatchExportNotification, BatchExportRun

Event = BatchExportNotification.Event
Delivery = BatchExportNotification.Delivery

SIGNATURE_HEADER = "X-Workspace-Signature"
SECRET_PREFIX = "whsec_"
TIMEOUT_SECONDS = 10
# Mail about an export goes out at most this often; the webhook hears of every event.
EMAIL_EVERY = dt.timedelta(days=1)
EMAILED_EVENTS = frozenset({Event.RUN_FAILED, Event.PAUSED})
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})

HEADLINES = {
    Event.RUN_FAILED: "a run failed",
    Event.PAUSED: "paused after repeated failures",
    Event.RECOVERED: "a run completed after failures",
}


def new_secret() -> str:
    """A webhook signing secret: shown once, stored sealed."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def webhook_secret(batch_export: BatchExport) -> str | None:
    return (batch_export.notifications_secrets or {}).get("secret")


def signature(secret: str, timestamp: int, body: str) -> str:
    """The value of the signature header for `body` sent at `timestamp` (Unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def run_document(run: BatchExportRun | None) -> dict | None:
    """The run as the API shows it."""
    if run is None:
        return None
    from pipelines.batch_exports.serializers import (
        BatchExportRunSerializer,  # the serializers import this module's neighbours
    )

    return dict(BatchExportRunSerializer(run).data)


def enqueue(
    *, batch_export: BatchExport, event: str, run: BatchExportRun | None, now: dt.datetime
) -> BatchExportNotification | None:
    """Write the notification of `event` to the outbox, for the channels that should hear of it; None when none
    should. Called in the transaction that records the run's end, with the export locked."""
    webhook = bool(batch_export.notifications_webhook_url and webhook_secret(batch_export))
    mailed_at = batch_export.notifications_emailed_at
    email = (
        event in EMAILED_EVENTS
        and batch_export.notifications_email
        and (mailed_at is None or now - mailed_at >= EMAIL_EVERY)
    )
    if not webhook and not email:
        return None
    if email:
        batch_export.notifications_emailed_at = now
        BatchExport.objects.filter(pk=batch_export.pk).update(notifications_emailed_at=now)
    notification = BatchExportNotification(
        batch_export=batch_export,
        run=run,
        event=event,
        created_at=now,
        webhook_status=Delivery.PENDING if webhook else None,
        email_status=Delivery.PENDING if email else None,
    )
    notification.body = json.dumps(
        {
            "id": str(notification.pk),
            "event": event,
            "batch_export": {"id": str(batch_export.pk), "name": batch_export.name},
            "run": run_document(run),
            "at": now.isoformat(),
        },
        cls=DjangoJSONEncoder,
        separators=(",", ":"),
    )
    notification.save()
    return notification


# Delivery


class DeliveryError(Exception):
    def __init__(self, message: str, *, retryable: bool):
        super().__init__(message)
        self.message = message
        self.retryable = retryable


def post_webhook(url: str, secret: str, body: str) -> int:
    """POST the signed body to `url` (its host checked and pinned as a destination's); returns the status.
    DeliveryError when it is refused, unreachable or answers other than 2xx."""
    try:
        scheme, address, port = check_destination_url(url, what="webhook url")
    except DestinationError as error:
        raise DeliveryError(error.message, retryable=error.retryable) from None
    parts = urlsplit(url)
    connection_class = _PinnedHTTPSConnection if scheme == "https" else _PinnedHTTPConnection
    connection = connection_class(parts.hostname, port, address, timeout=TIMEOUT_SECONDS)
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {
        "Host": host,
        "Content-Type": "application/json",
        "User-Agent": "analytics-workspace-notifications",
        SIGNATURE_HEADER: signature(secret, int(time.time()), body),
    }
    try:
        connection.request("POST", path, body=body.encode(), headers=headers)
        response = connection.getresponse()
        response.read(2000)
    except ssl.SSLCertVerificationError as error:
        raise DeliveryError(f"TLS verification of {host} failed: {error}", retryable=False) from None
    except (OSError, http.client.HTTPException) as error:
        raise DeliveryError(f"Could not reach {host}: {type(error).__name__}", retryable=True) from None
    finally:
        connection.close()
    if not 200 <= response.status < 300:
        retryable = response.status in RETRYABLE_STATUSES
        raise DeliveryError(f"{host} answered {response.status} {response.reason}", retryable=retryable)
    return response.status


def admin_emails(batch_export: BatchExport) -> list[str]:
    """The addresses of the admins and owners of the export's organization."""
    memberships = Membership.objects.filter(
        organization_id=batch_export.project.organization_id, level__gte=Membership.Level.ADMIN, user__is_active=True
    )
    return sorted({email for email in memberships.values_list("user__email", flat=True) if email})


def notification_email(notification: BatchExportNotification, recipients: list[str]) -> EmailMessage:
    export = notification.batch_export
    document = json.loads(notification.body)
    run = document.get("run") or {}
    headline = HEADLINES[notification.event]
    lines = [f"Batch export {export.name} ({export.pk}) of project {export.project.name}: {headline}."]
    if run:
        interval = f"[{run['data_interval_start']}, {run['data_interval_end']})"
        lines.append(f"Run {run['id']} over {interval}: {run['status']}.")
        if run.get("latest_error"):
            lines.append(f"Error: {run['latest_error']}")
    if notification.event == Event.PAUSED:
        lines.append('The export stays paused until it is unpaused (POST .../unpause/ with {"backfill": true} also')
        lines.append("exports the intervals missed meanwhile).")
    lines.append(f"This address hears of the export's failures at most once every {EMAIL_EVERY.days} day(s).")
    subject = f"Batch export {export.name}: {headline}"
    return EmailMessage(subject, "\n".join(lines) + "\n", settings.DEFAULT_FROM_EMAIL, recipients)


def _attempt(channel: str, outcome: str, detail: str, at: dt.datetime) -> dict:
    return {"at": at.isoformat(), "channel": channel, "outcome": outcome, "detail": detail[:500]}


def deliver(notification_id, *, last_attempt: bool) -> bool:
    """Try each pending channel of the notification once, recording the attempts and their outcomes; returns True
    when none is left pending (delivered, or failed for good: refused, or still failing on the last attempt)."""
    notification = (
        BatchExportNotification.objects.select_related("batch_export__project").filter(pk=notification_id).first()
    )
    if notification is None:
        return True
    export = notification.batch_export
    attempts = list(notification.attempts)
    changes = {}
    if notification.webhook_status == Delivery.PENDING:
        now = timezone.now()
        url, secret = export.notifications_webhook_url, webhook_secret(export)
        if not url or not secret:
            changes["webhook_status"] = Delivery.SKIPPED
            attempts.append(_attempt("webhook", "skipped", "The export has no webhook any more.", now))
        else:
            try:
                status = post_webhook(url, secret, notification.body)
            except DeliveryError as error:
                attempts.append(_attempt("webhook", "failed", error.message, now))
                if not error.retryable or last_attempt:
                    changes["webhook_status"] = Delivery.FAILED
            else:
                changes["webhook_status"] = Delivery.DELIVERED
                attempts.append(_attempt("webhook", "delivered", f"Answered {status}.", now))
    if notification.email_status == Delivery.PENDING:
        now = timezone.now()
        recipients = admin_emails(export)
        if not recipients:
            changes["email_status"] = Delivery.SKIPPED
            attempts.append(_attempt("email", "skipped", "The organization has no admin with an email address.", now))
        else:
            try:
                notification_email(notification, recipients).send()
            except Exception as error:  # noqa: BLE001 - any mail failure is an attempt that failed, tried again
                attempts.append(_attempt("email", "failed", f"{type(error).__name__}: {error}", now))
                if last_attempt:
                    changes["email_status"] = Delivery.FAILED
            else:
                changes["email_status"] = Delivery.DELIVERED
                attempts.append(_attempt("email", "delivered", f"Sent to {len(recipients)} address(es).", now))
    if len(attempts) > len(notification.attempts):
        BatchExportNotification.objects.filter(pk=notification.pk).update(
            attempts=attempts, last_attempt_at=timezone.now(), **changes
        )
    webhook = changes.get("webhook_status", notification.webhook_status)
    email = changes.get("email_status", notification.email_status)
    return Delivery.PENDING not in (webhook, email)
