from django.db import models
from rest_framework import serializers

from workspace.api.fields import StrictBooleanField, StrictCharField, StrictEmailField, StrictSlugField, StrictURLField


class ModelSerializer(serializers.ModelSerializer):
    """DRF's ModelSerializer with model fields that take their JSON type only (`"name": 0` is a 400)."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.BooleanField: StrictBooleanField,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        models.EmailField: StrictEmailField,
        models.SlugField: StrictSlugField,
        models.URLField: StrictURLField,
    }
