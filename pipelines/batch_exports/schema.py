"""OpenAPI for the batch-export destination: what each type needs in its `config`, from its `Config` model
(pipelines.batch_exports.destinations)."""

from drf_spectacular.extensions import OpenApiSerializerExtension

from pipelines.batch_exports.destinations import DESTINATIONS


class BatchExportDestinationExtension(OpenApiSerializerExtension):
    """A create states each type's config; a PATCH merges `config` into the stored one, so nothing is required."""

    target_class = "pipelines.batch_exports.serializers.BatchExportDestinationSerializer"

    def _whole(self, auto_schema, direction) -> bool:
        return direction == "request" and auto_schema.method in ("POST", "PUT")

    def _partial(self, auto_schema, direction) -> bool:
        return direction == "request" and auto_schema.method == "PATCH"

    def get_name(self, auto_schema, direction):
        if self._whole(auto_schema, direction):
            return "BatchExportDestinationCreate"
        return "PatchedBatchExportDestination" if self._partial(auto_schema, direction) else None

    def map_serializer(self, auto_schema, direction):
        if not self._whole(auto_schema, direction):
            schema = auto_schema._map_basic_serializer(self.target, direction)
            if self._partial(auto_schema, direction):
                # A PATCH may leave out `type`: the config is merged into the stored one of the stored type.
                schema.pop("required", None)
            return schema
        alternatives = []
        for destination_type, destination in DESTINATIONS.items():
            alternative = {
                "type": "object",
                "properties": {
                    # Wrapped in allOf so that the enum hook does not merge the one-value enums into one.
                    "type": {"type": "string", "allOf": [{"enum": [destination_type]}]},
                    "config": destination.Config.openapi_schema(),
                },
                # `config` may be left out when an empty one will do.
                "required": ["type", "config"] if destination.problems({}) else ["type"],
            }
            alternatives.append(alternative)
        return {"oneOf": alternatives}
