"""The models Django loads for the dashboards app; each lives in its room's package (same app label, same tables).
The callables the migrations name (`dashboards.models.new_short_id`, ...) are re-exported with them."""

from dashboards.core.models import (  # noqa: F401
    Dashboard,
    DashboardCollaborator,
    DashboardTag,
    DashboardTile,
    Insight,
    InsightTag,
    SharingConfiguration,
    SharingPassword,
    Text,
    new_access_token,
    new_short_id,
)
from dashboards.public.models import EmbedSecret, new_embed_kid, validate_allowed_origins  # noqa: F401
