import django_filters

from pipelines.models import BatchExport, Plugin


class BatchExportFilterSet(django_filters.FilterSet):
    paused = django_filters.BooleanFilter(field_name="paused", label="Only paused (true) or running (false) exports")
    interval = django_filters.ChoiceFilter(
        field_name="interval", choices=BatchExport.Interval.choices, label="Interval"
    )
    destination_type = django_filters.ChoiceFilter(
        field_name="destination_type", choices=BatchExport.DestinationType.choices, label="Destination type"
    )

    class Meta:
        model = BatchExport
        fields: list[str] = []


class PluginFilterSet(django_filters.FilterSet):
    plugin_type = django_filters.ChoiceFilter(
        field_name="plugin_type", choices=Plugin.PluginType.choices, label="Plugin type"
    )
    is_global = django_filters.BooleanFilter(field_name="is_global", label="Only global (true) or local (false)")

    class Meta:
        model = Plugin
        fields: list[str] = []
