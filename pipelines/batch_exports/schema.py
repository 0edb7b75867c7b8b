"""OpenAPI for the batch-export destination: what each type needs in its `config`
(pipelines.batch_exports.destinations)."""

from drf_spectacular.extensions import OpenApiSerializerExtension

from pipelines.batch_exports.destinations import (
    DESTINATIONS,
    PREFIX_MAX_LENGTH,
    PREFIX_PATTERN,
    S3_FILE_FORMATS,
    URL_PATTERN,
)


def config_schema(spec, destination_type: str) -> dict:
    """The `config` a destination of this type needs when it is set whole (create, or a change of type)."""
    properties: dict[str, dict] = {}
    for key in spec.strings:
        properties[key] = (
            {"type": "string", "minLength": 1} if key in spec.required else {"type": "string", "nullable": True}
        )
    for key in spec.urls:
        # An optional URL may also be left empty.
        pattern = URL_PATTERN.pattern if key in spec.required else f"^$|{URL_PATTERN.pattern}"
        properties[key] = {**properties[key], "pattern": pattern}
    for key in spec.prefixes:
        properties[key] = {**properties[key], "pattern": PREFIX_PATTERN.pattern, "maxLength": PREFIX_MAX_LENGTH}
    for key, allowed in spec.choices:
        # Null is one of the values (OpenAPI 3.0 reads `nullable` with an enum as allowing only the enum's values).
        properties[key] = {"type": "string", "nullable": True, "enum": [*allowed, None]}
    for key in spec.integers:
        properties[key] = {"type": "integer", "minimum": 1, "maximum": 65535, "nullable": True}
    for key in spec.booleans:
        properties[key] = {"type": "boolean", "nullable": True}
    for key in spec.lists:
        properties[key] = {"type": "array", "items": {"type": "string"}, "nullable": True}
    schema: dict = {"type": "object", "properties": properties, "additionalProperties": False}
    if spec.required:
        schema["required"] = list(spec.required)
    all_of = [
        {"anyOf": [{"required": [key], "properties": {key: {"type": "string", "minLength": 1}}} for key in group]}
        for group in spec.one_of
    ]
    if destination_type == "S3":
        properties["file_format"] = {"type": "string", "enum": list(S3_FILE_FORMATS), "default": "JSONLines"}
        every_compression = sorted({c for compressions in S3_FILE_FORMATS.values() for c in compressions if c})
        properties["compression"] = {"type": "string", "nullable": True, "enum": [*every_compression, None]}
        alternatives = []
        for file_format, compressions in S3_FILE_FORMATS.items():
            alternative = {
                "properties": {
                    "file_format": {"enum": [file_format]},
                    "compression": {
                        "type": "string",
                        "nullable": True,
                        "enum": [*sorted(c for c in compressions if c), None],
                    },
                }
            }
            if file_format != "JSONLines":  # JSONLines is the default when file_format is left out
                alternative["required"] = ["file_format"]
            alternatives.append(alternative)
        all_of.append({"anyOf": alternatives})
    if all_of:
        schema["allOf"] = all_of
    return schema


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
        for destination_type, spec in DESTINATIONS.items():
            alternative = {
                "type": "object",
                "properties": {
                    # Wrapped in allOf so that the enum hook does not merge the one-value enums into one.
                    "type": {"type": "string", "allOf": [{"enum": [destination_type]}]},
                    "config": config_schema(spec, destination_type),
                },
                "required": ["type", "config"] if spec.required or spec.one_of else ["type"],
            }
            alternatives.append(alternative)
        return {"oneOf": alternatives}
