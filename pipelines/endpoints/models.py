"""An endpoint is a saved query of a project that callers run by name, with typed parameters (a JSON Schema object),
in versions that never change under a caller; its usage is counted per hour."""

from django.conf import settings
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models

from organizations.models import Project

NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9_-]{0,126}[a-z0-9])?$"
DEFAULT_CACHE_SECONDS = 300
MAX_CACHE_SECONDS = 7 * 24 * 3600  # as long as the query layer keeps a result (pipelines.query.runner)


def empty_parameters() -> dict:
    return {"type": "object", "properties": {}}


class Endpoint(models.Model):
    """A saved query (any node `/query/` runs) with a name unique in its project, run through
    `…/endpoints/<name>/run/`. `query` and `parameters` are those of the latest version (`version`); each version's
    pair is kept in EndpointVersion, unchanged once written."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(
        max_length=128,
        validators=[
            RegexValidator(
                NAME_PATTERN,
                "A name is a slug: lower-case letters, digits, `-` and `_`, beginning and ending with a letter or a "
                "digit.",
            )
        ],
    )
    description = models.TextField(blank=True, default="", max_length=4000)
    query = models.JSONField()
    parameters = models.JSONField(default=empty_parameters)
    cache_seconds = models.PositiveIntegerField(
        default=DEFAULT_CACHE_SECONDS, validators=[MaxValueValidator(MAX_CACHE_SECONDS)]
    )
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="unique_endpoint_name_per_project")]
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class EndpointVersion(models.Model):
    """One version of an endpoint: its query and parameters as published, never changed afterwards, so that
    `?version=N` answers as it did before later versions."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    query = models.JSONField()
    parameters = models.JSONField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "version"], name="unique_endpoint_version")]
        ordering = ["endpoint", "version"]

    def __str__(self) -> str:
        return f"{self.endpoint_id} v{self.version}"


# The upper bounds (ms) of the buckets that runs' durations are counted in; the last bucket holds the longer ones.
DURATION_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class EndpointUsage(models.Model):
    """An endpoint's runs in one hour, as counters: one row per endpoint and hour, updated in place by each run (so the
    table holds at most the hours kept, `USAGE_KEPT_HOURS` of them, per endpoint). Durations are counted in buckets
    (`durations[i]`: runs that took at most DURATION_BUCKETS_MS[i] ms; the last: longer), from which p50 and p95 are
    read."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="usage")
    hour = models.DateTimeField()
    calls = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    cache_hits = models.PositiveBigIntegerField(default=0)
    rows = models.PositiveBigIntegerField(default=0)
    duration_ms_total = models.PositiveBigIntegerField(default=0)
    duration_ms_max = models.PositiveBigIntegerField(default=0)
    d0 = models.PositiveBigIntegerField(default=0)
    d1 = models.PositiveBigIntegerField(default=0)
    d2 = models.PositiveBigIntegerField(default=0)
    d3 = models.PositiveBigIntegerField(default=0)
    d4 = models.PositiveBigIntegerField(default=0)
    d5 = models.PositiveBigIntegerField(default=0)
    d6 = models.PositiveBigIntegerField(default=0)
    d7 = models.PositiveBigIntegerField(default=0)
    d8 = models.PositiveBigIntegerField(default=0)
    d9 = models.PositiveBigIntegerField(default=0)
    d10 = models.PositiveBigIntegerField(default=0)
    d11 = models.PositiveBigIntegerField(default=0)

    BUCKET_FIELDS = tuple(f"d{index}" for index in range(len(DURATION_BUCKETS_MS) + 1))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "hour"], name="unique_endpoint_usage_hour")]
        ordering = ["endpoint", "hour"]

    def __str__(self) -> str:
        return f"{self.endpoint_id} {self.hour:%Y-%m-%d %H:00}"

    @property
    def durations(self) -> list[int]:
        return [getattr(self, name) for name in self.BUCKET_FIELDS]
