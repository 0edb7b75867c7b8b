"""The module Django loads for the dashboards app's models: importing each room's models registers them (same app
label, same tables). The callables the migrations name (`dashboards.models.new_short_id`, ...) are re-exported."""

import dashboards.core.models  # noqa: F401
import dashboards.public.models  # noqa: F401
from dashboards.core.models import new_access_token, new_short_id  # noqa: F401
from dashboards.public.models import new_embed_kid, validate_allowed_origins  # noqa: F401
