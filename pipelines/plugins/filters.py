import django_filters

from pipelines.plugins.models import Plugin
from workspace.api.filters import FilterSet, StrictBooleanFilter


class PluginFilterSet(FilterSet):
    plugin_type = django_filters.ChoiceFilter(
        field_name="plugin_type", choices=Plugin.PluginType.choices, label="Plugin type"
    )
    is_global = StrictBooleanFilter(field_name="is_global", label="Only global (true) or local (false)")

    class Meta:
        model = Plugin
        fields: list[str] = []
