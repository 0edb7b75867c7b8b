"""The models Django loads for the pipelines app; each lives in its subsystem's package (same app label, same
tables)."""

from pipelines.batch_exports.models import (  # noqa: F401
    BatchExport,
    BatchExportBackfill,
    BatchExportNotification,
    BatchExportRun,
    BatchExportRunLog,
)
from pipelines.clickhouse.models import DistinctIdChange, SyncStream  # noqa: F401
from pipelines.endpoints.models import Endpoint, EndpointUsage, EndpointVersion  # noqa: F401
from pipelines.events.models import (  # noqa: F401
    Event,
    EventDefinition,
    EventProperty,
    EventUUID,
    Person,
    PersonDistinctId,
    PropertyDefinition,
)
from pipelines.plugins.models import Plugin, PluginConfig, PluginSourceFile  # noqa: F401
