"""The capture endpoints at the root, where the reference's SDKs send events (DECISIONS.md §13)."""

from django.urls import re_path

from pipelines.events.capture import CaptureView

urlpatterns = [
    # /capture/, /e/ and /i/v0/e/ (one event or several) and /batch/ (the SDKs' batches) take the same bodies.
    re_path(r"^(?:capture|e|i/v0/e|batch)/?$", CaptureView.as_view(), name="capture"),
]
