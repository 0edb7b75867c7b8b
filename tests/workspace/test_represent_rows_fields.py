"""represent_rows reads a serializer's fields once per class only where every instance would represent rows alike,
and keeps big integers (every model's id) as they are unless they are shown as strings."""

import datetime as dt
import uuid

import pytest
from rest_framework import serializers

from workspace.api import serializers as plumbing
from workspace.api.fields import StrictCharField, StrictIntegerChoiceField
from workspace.api.serializers import readable_field_names, represent_rows
from workspace.models import User


class Plain(serializers.Serializer):
    id = serializers.BigIntegerField()
    text = StrictCharField()
    level = StrictIntegerChoiceField(choices=[(1, "one")])
    when = serializers.DateTimeField()
    identifier = serializers.UUIDField(format="hex")
    tags = serializers.ListField(child=serializers.CharField())
    secret = serializers.CharField(write_only=True)


class WithContext(serializers.Serializer):
    name = serializers.CharField()
    greeting = serializers.SerializerMethodField()

    def get_greeting(self, value) -> str:
        return f"{self.context['hello']} {value}"


class Shouting(serializers.CharField):
    def to_representation(self, value):
        return str(value).upper()


class WithOwnField(serializers.Serializer):
    name = Shouting()


@pytest.fixture(autouse=True)
def _empty_cache():
    plumbing._READABLE_FIELDS.clear()
    plumbing._PLANS.clear()
    yield
    plumbing._READABLE_FIELDS.clear()
    plumbing._PLANS.clear()


def test_fields_that_read_only_their_options_are_read_once_for_the_class():
    row = {"id": 2**40, "text": 5, "level": 1, "when": None, "identifier": uuid.UUID(int=3), "tags": ["a", 1]}
    expected = [{"id": 2**40, "text": "5", "level": 1, "when": None, "identifier": "0" * 31 + "3", "tags": ["a", "1"]}]

    assert represent_rows(Plain(), [row]) == expected
    assert (Plain, frozenset()) in plumbing._READABLE_FIELDS
    assert represent_rows(Plain(), [row]) == expected
    assert readable_field_names(Plain()) == ["id", "text", "level", "when", "identifier", "tags"]


def test_the_fields_of_a_model_serializer_are_read_once_for_the_class():
    """This project's ModelSerializer builds its fields from the class alone (a per-class prototype, copied)."""

    class Person(plumbing.ModelSerializer):
        class Meta:
            model = User
            fields = ["id", "email", "first_name"]

    row = {"id": 7, "email": "a@example.com", "first_name": "A"}
    assert represent_rows(Person(), [row]) == [row]
    assert (Person, frozenset()) in plumbing._READABLE_FIELDS
    assert represent_rows(Person(), [row]) == [row]


def test_a_field_reading_the_context_is_read_off_each_instance():
    rows = [{"name": "a", "greeting": "b"}]

    assert represent_rows(WithContext(context={"hello": "hi"}), rows) == [{"name": "a", "greeting": "hi b"}]
    assert represent_rows(WithContext(context={"hello": "yo"}), rows) == [{"name": "a", "greeting": "yo b"}]
    assert (WithContext, frozenset()) not in plumbing._READABLE_FIELDS
    # Represented by the caller, the method field no longer reads the context.
    ready = frozenset({"greeting"})
    assert represent_rows(WithContext(context={"hello": "hi"}), rows, ready=ready) == rows
    assert (WithContext, ready) in plumbing._READABLE_FIELDS


def test_a_field_class_with_its_own_representation_is_read_off_each_instance():
    assert represent_rows(WithOwnField(), [{"name": "a"}]) == [{"name": "A"}]
    assert (WithOwnField, frozenset()) not in plumbing._READABLE_FIELDS


def test_date_times_are_shown_in_the_zone_of_each_page(settings):
    from django.utils import timezone

    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    row = {"id": 1, "text": "", "level": 1, "when": at, "identifier": None, "tags": []}
    represent_rows(Plain(), [row])
    with timezone.override("Europe/Paris"):
        [item] = represent_rows(Plain(), [row])
    assert item["when"] == "2026-01-02T04:04:05+01:00"


@pytest.mark.parametrize(
    "field,value,expected",
    [
        (serializers.BigIntegerField(), 2**62, 2**62),
        (serializers.BigIntegerField(), True, 1),
        (serializers.BigIntegerField(), "9", 9),
        (serializers.BigIntegerField(coerce_to_string=True), 2**62, str(2**62)),
    ],
)
def test_big_integers_are_represented_as_their_field_represents_them(field, value, expected):
    class One(serializers.Serializer):
        number = field

    [item] = represent_rows(One(), [{"number": value}])
    assert item["number"] == expected and type(item["number"]) is type(expected)


class Identifier(serializers.Serializer):
    id = serializers.UUIDField()


@pytest.mark.parametrize("value", [uuid.UUID(int=2**127 + 5), "80000000-0000-0000-0000-000000000005"])
def test_a_uuid_and_its_text_are_written_as_drf_writes_them(value):
    """A UUID read as text (uuid::text on PostgreSQL) is kept as it is where DRF would write str(value)."""
    from workspace.api.renderers import JSONRenderer

    represented = represent_rows(Identifier(), [{"id": value}])

    assert type(represented[0]["id"]) is type(value)  # kept, for the renderer to write
    assert JSONRenderer().render(represented) == JSONRenderer().render([Identifier({"id": value}).data])
    assert JSONRenderer().render(represented) == b'[{"id":"80000000-0000-0000-0000-000000000005"}]'
