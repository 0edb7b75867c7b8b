"""The admin pages of the pipelines app, registered by each subsystem's admin module."""

from pipelines.batch_exports import admin as batch_exports_admin  # noqa: F401
from pipelines.clickhouse import admin as clickhouse_admin  # noqa: F401
from pipelines.endpoints import admin as endpoints_admin  # noqa: F401
from pipelines.events import admin as events_admin  # noqa: F401
from pipelines.plugins import admin as plugins_admin  # noqa: F401
