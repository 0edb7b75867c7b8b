"""What the dashboards' actions take besides a resource: a tile to move or copy, a new order of tiles, the version to
revert to, `?refresh=` and `?dry_run=`, a template document."""

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from dashboards.core.fields import TemplateDocumentField
from dashboards.core.serializers import MAX_TILES_PER_WRITE
from dashboards.core.template_library import TemplateError, validate_layouts, validate_template
from pipelines.query.runner import REFRESH_MODES, validate_query
from workspace.api.fields import StrictBooleanField, StrictCharField, StrictUUIDField


class TileReferenceSerializer(serializers.Serializer):
    id = serializers.IntegerField()


class MoveTileSerializer(serializers.Serializer):
    """`{"tile": {"id": N}, "toDashboard": M}`, the reference API's spelling."""

    tile = TileReferenceSerializer()
    toDashboard = serializers.IntegerField()  # noqa: N815 - the field name is part of the contract


class CopyTileSerializer(serializers.Serializer):
    """`{"fromDashboardId": M, "tileId": N}`: the tile N of the project's dashboard M."""

    fromDashboardId = serializers.IntegerField()  # noqa: N815 - the field name is part of the contract
    tileId = serializers.IntegerField()  # noqa: N815


class AddInsightSerializer(serializers.Serializer):
    """`{"insightId": N, "layouts"?, "color"?}`: the project's insight N, and how its new tile looks (the reference
    toolkit's spelling)."""

    insightId = serializers.IntegerField()  # noqa: N815 - the field name is part of the contract
    layouts = serializers.JSONField(required=False, help_text="The new tile's layouts, as a tile's `layouts`.")
    color = StrictCharField(max_length=32, required=False, allow_null=True, allow_blank=True)

    def validate_layouts(self, value):
        message = validate_layouts(value)
        if message:
            raise serializers.ValidationError(message, code="invalid_input")
        return value


class ReorderTilesSerializer(serializers.Serializer):
    """`{"tile_order": [ids]}`: every tile the dashboard shows, each once, in their new order."""

    tile_order = serializers.ListField(child=serializers.IntegerField(), max_length=MAX_TILES_PER_WRITE)


class RevertToVersionSerializer(serializers.Serializer):
    version_id = StrictUUIDField(help_text="The version's `id`, as `versions/` lists it (a UUID string).")


# The reference's older spelling, which its clients still send: `true` always computes, `false` is the default.
LEGACY_REFRESH = {"true": "force_blocking", "false": None}


class RefreshSerializer(serializers.Serializer):
    """`?refresh=` on a GET that shows insights: blocking (cached while fresh, else computed), force_blocking (always
    computed) or force_cache (never computed), or the legacy `true` / `false`; anything else is a 400 naming
    `refresh`."""

    refresh = serializers.ChoiceField(choices=[*REFRESH_MODES, *LEGACY_REFRESH], required=False)

    @classmethod
    def mode(cls, query_params, default: str) -> str:
        serializer = cls(data=query_params)
        serializer.is_valid(raise_exception=True)
        mode = serializer.validated_data.get("refresh", default)
        if mode in LEGACY_REFRESH:
            return LEGACY_REFRESH[mode] or default
        return mode


class DryRunSerializer(serializers.Serializer):
    """`?dry_run=true`: validate and answer with what would be created, writing nothing."""

    dry_run = StrictBooleanField(required=False, default=False)

    def to_internal_value(self, data):
        # A query string holds text: `true` or `false` only, as the JSON body's booleans.
        text = {"true": True, "false": False}.get(data.get("dry_run"), data.get("dry_run"))
        return super().to_internal_value({} if text is None else {"dry_run": text})


class TemplateJSONSerializer(serializers.Serializer):
    """`{"template": {...}, "dry_run"?: bool}`, the template checked against template_library.TEMPLATE_SCHEMA and each
    insight's query as an insight save checks it (for the serializer context's `project`).

    `dry_run` in the body means what `?dry_run=` means (a client that put it in the body had the dashboard
    created): either one true makes the call a dry run."""

    template = TemplateDocumentField()
    dry_run = StrictBooleanField(
        required=False,
        default=False,
        help_text="Validate and answer with what would be created, writing nothing (as `?dry_run=true`; either one "
        "true makes it a dry run).",
    )

    def validate_template(self, value) -> dict:
        try:
            template = validate_template(value)
        except TemplateError as error:
            code = {"required": "required", "maxItems": "max_length", "maxLength": "max_length"}.get(
                error.keyword, "invalid_input"
            )
            detail = [ErrorDetail(error.message, code)]
            for part in reversed(error.path):
                detail = {part: detail}
            raise serializers.ValidationError(detail) from error
        # Each insight's query is held to what saving an insight holds it to (a 400 naming its path in the body).
        for index, tile in enumerate(template["tiles"]):
            if tile["type"] == "INSIGHT":
                validate_query(
                    project=self.context["project"],
                    query=tile["query"],
                    path=("template", "tiles", str(index), "query"),
                )
        return template
