"""The lean list path (represent_rows) renders exactly what a serializer gives for model instances."""

import datetime as dt
import uuid
from types import SimpleNamespace

import pytest
from rest_framework import serializers

from workspace.api.renderers import JSONRenderer
from workspace.api.serializers import represent_rows

AT = dt.datetime(2026, 11, 21, 12, 30, 5, 123456, tzinfo=dt.UTC)


class Shown(serializers.Serializer):
    text = serializers.CharField()
    email = serializers.EmailField()
    number = serializers.IntegerField()
    flag = serializers.BooleanField()
    key = serializers.UUIDField()
    hex_key = serializers.UUIDField(format="hex")
    config = serializers.JSONField()
    level = serializers.ChoiceField(choices=[(1, "member"), (8, "admin")])
    state = serializers.ChoiceField(choices=["Running", "Completed"])
    at = serializers.DateTimeField()
    price = serializers.DecimalField(max_digits=6, decimal_places=2)
    anything = serializers.ReadOnlyField()
    secret = serializers.CharField(write_only=True)


ROWS = [
    {
        "text": "Grüße",
        "email": "a@example.com",
        "number": 7,
        "flag": True,
        "key": uuid.UUID("0d9b9ffb-e090-4fd8-a551-81cfd4bcbb1c"),
        "hex_key": uuid.UUID("0d9b9ffb-e090-4fd8-a551-81cfd4bcbb1c"),
        "config": {"nested": [1, 2.5, None]},
        "level": 8,
        "state": "Running",
        "at": AT,
        "price": "1.5",
        "anything": [AT.date()],
        "secret": "never shown",
    },
    {
        # Values a field converts: a whole-second UTC time, another zone, an integer given as text, a bool as int.
        "text": 12,
        "email": "b@example.com",
        "number": "12",
        "flag": 1,
        "key": "0d9b9ffb-e090-4fd8-a551-81cfd4bcbb1c",
        "hex_key": uuid.UUID(int=1),
        "config": "plain",
        "level": 1,
        "state": "Completed",
        "at": AT.replace(microsecond=0).astimezone(dt.timezone(dt.timedelta(hours=-5))),
        "price": 2,
        "anything": None,
        "secret": "",
    },
    {name: None for name in Shown().fields},
]


@pytest.mark.parametrize("row", ROWS, ids=["native", "converted", "nulls"])
def test_a_row_renders_as_the_serializer_renders_its_instance(row):
    lean = represent_rows(Shown(), [row])
    normal = Shown(SimpleNamespace(**row)).data
    assert JSONRenderer().render(lean) == JSONRenderer().render([normal])
    assert "secret" not in lean[0]


def test_ready_fields_are_copied_as_they_are():
    nested = {"already": "represented"}
    row = {**ROWS[0], "text": nested}
    assert represent_rows(Shown(), [row], ready=frozenset({"text"}))[0]["text"] is nested


@pytest.mark.parametrize("row", ROWS, ids=["native", "converted", "nulls"])
def test_a_tuple_row_in_the_order_of_its_columns_renders_as_its_dict(row):
    columns = list(reversed(row))  # any order: each value is found by its field's name
    as_tuple = tuple(row[name] for name in columns)
    assert represent_rows(Shown(), [as_tuple], columns=columns) == represent_rows(Shown(), [row])
