"""CompiledQuery (workspace/api/rows.py): a values queryset compiled once per connection, run with other ids."""

import datetime as dt
import uuid

import pytest
from django.db.models import Count

from organizations.models import Membership, Organization
from workspace.api.rows import CompiledJoin, CompiledQuery
from workspace.models import User

pytestmark = pytest.mark.django_db


def memberships(user: int, level: int):
    return (
        Membership.objects.filter(user_id=user, level__gte=level)
        .annotate(members=Count("organization__memberships"))
        .order_by("id")
        .values("id", "level", "joined_at", "organization__name", "user__uuid", "members")
    )


def test_rows_are_what_the_queryset_gives_for_each_set_of_arguments(alice, bob):
    calls = []

    def build(**arguments):
        calls.append(arguments)
        return memberships(**arguments)

    compiled = CompiledQuery(build)
    for user, level in [(alice.pk, 1), (bob.pk, 1), (alice.pk, 15), (bob.pk, 15), (10**12, 1)]:
        assert compiled.rows(user=user, level=level) == list(memberships(user, level))
    assert len(calls) == 2  # built and compiled on this connection's first run only (twice: see CompiledQuery)
    [row] = compiled.rows(user=alice.pk, level=1)
    assert isinstance(row["joined_at"], dt.datetime) and row["joined_at"].tzinfo is not None
    assert row["user__uuid"] == alice.uuid  # converted as the ORM converts it (a UUID on SQLite too)


def test_an_argument_that_does_not_reach_the_sql_as_given_is_refused():
    changed = CompiledQuery(lambda user: User.objects.filter(pk=user + 1).values("id"))
    with pytest.raises(ValueError, match="changes with its arguments"):
        changed.rows(user=1)
    unused = CompiledQuery(lambda user, level: User.objects.filter(pk=user).values("id"))
    with pytest.raises(ValueError, match="level"):
        unused.rows(user=1, level=2)


def test_a_query_whose_sql_changes_with_its_arguments_is_refused():
    compiled = CompiledQuery(lambda user: User.objects.filter(pk__in=range(user % 2 + 1)).values("id"))
    with pytest.raises(ValueError, match="SQL changes"):
        compiled.rows(user=1)


def test_arguments_are_integers():
    compiled = CompiledQuery(lambda user: User.objects.filter(pk=user).values("id"))
    assert compiled.rows(user=1) == []
    with pytest.raises(TypeError):
        compiled.rows(user="1 OR 1=1")
    with pytest.raises(ValueError):
        compiled.rows(user=2**63)


def test_inline_arguments_are_written_into_the_sql_and_the_rest_sent_apart(alice, bob, monkeypatch):
    from django.db.models import F

    from workspace.api import rows

    def build(least, most):
        # `%` (modulo) is written `%%` in the SQL: not a parameter's place.
        return (
            User.objects.filter(pk__gte=least, pk__lte=most)
            .annotate(odd=F("id") % 2)
            .order_by("id")
            .values("id", "odd")
        )

    sent = []
    real = rows._with_inlined
    monkeypatch.setattr(rows, "_with_inlined", lambda sql, arguments: sent.append(real(sql, arguments)) or sent[-1])
    users = sorted([alice.pk, bob.pk])

    for least, most in [(users[0], users[1]), (users[1], users[1]), (users[0] + 10**6, 10**7)]:
        found = rows.compiled_rows("inline", build, inline=frozenset({"least"}), least=least, most=most)
        assert found == [{"id": pk, "odd": pk % 2} for pk in users if least <= pk <= most]
        assert f">= {least}" in sent[-1]  # written into the statement
        assert f"<= {most}" not in sent[-1]  # sent apart from it
    with pytest.raises(TypeError):
        rows.compiled_rows(
            "inline uuid",
            lambda user: User.objects.filter(uuid=user).values("id"),
            inline=frozenset({"user"}),
            user=alice.uuid,
        )


def test_uuid_arguments_reach_the_sql_in_the_database_form(alice, organization, other_organization, charlie):
    compiled = CompiledQuery(
        lambda organization: Membership.objects.filter(organization_id=organization).order_by("id").values("user_id")
    )

    assert compiled.rows(organization=organization.pk) == [{"user_id": alice.pk}]
    assert compiled.rows(organization=other_organization.pk) == [{"user_id": charlie.pk}]
    with pytest.raises(TypeError):
        compiled.rows(organization=str(organization.pk))


def test_the_least_recently_used_shapes_are_dropped(alice, bob, monkeypatch):
    from django.db import connections

    from workspace.api import rows

    monkeypatch.setattr(rows, "COMPILED_PER_CONNECTION", 2)
    connection = connections["default"]  # the connection itself, not the proxy
    connection.__dict__.pop("compiled_queries", None)
    queries = [CompiledQuery(lambda user: User.objects.filter(pk=user).values("email")) for _ in range(3)]

    for query in [queries[0], queries[1], queries[0], queries[2]]:
        assert query.rows(user=bob.pk) == [{"email": bob.email}]

    assert [shape for shape, _ in connection.__dict__["compiled_queries"]] == [queries[0], queries[2]]


def organization_of(organization):
    return Organization.objects.filter(pk=organization).values("id", "name", "created_at")


def members_of(organization, level):
    return (
        Membership.objects.filter(organization_id=organization, level__gte=level)
        .order_by("-level", "id")
        .values("id", "level", "joined_at", "user__uuid")
    )


def test_a_join_gives_the_outer_row_and_the_inner_rows_as_each_query_gives_them(
    alice, bob, organization, other_organization
):
    join = CompiledJoin(organization_of, members_of, order_by=("level", "id"))

    for found, level in [(organization, 1), (other_organization, 1), (organization, 15)]:
        outer, inner = join.rows(organization=found.pk, level=level)
        assert outer == organization_of(found.pk).get()
        assert inner == sorted(members_of(found.pk, level), key=lambda row: (row["level"], row["id"]))
        assert all(isinstance(row["user__uuid"], uuid.UUID) for row in inner)  # converted as the ORM converts it
    [row] = join.rows(organization=organization.pk, level=1)[1][:1]
    assert isinstance(row["joined_at"], dt.datetime) and row["joined_at"].tzinfo is not None


def test_a_join_without_inner_rows_gives_the_outer_row_alone(organization):
    join = CompiledJoin(organization_of, members_of, order_by=("id",))

    assert join.rows(organization=organization.pk, level=10**6) == (organization_of(organization.pk).get(), [])


def test_a_join_without_an_outer_row_gives_nothing(alice, organization):
    """The inner rows of an outer row that is not found are not given (a child of an object the caller cannot see)."""
    join = CompiledJoin(
        lambda organization: organization_of(organization).filter(name="elsewhere"), members_of, order_by=("id",)
    )

    assert join.rows(organization=organization.pk, level=1) == (None, [])


def test_instances_are_what_the_orm_builds_with_their_annotations(alice, organization):
    from workspace.api.rows import concrete_attnames

    compiled = CompiledQuery(
        lambda organization: (
            Organization.objects.filter(pk=organization)
            .annotate(members=Count("memberships"))
            .values(*concrete_attnames(Organization), "members")
        )
    )

    [found] = compiled.instances(Organization, organization=organization.pk)
    expected = Organization.objects.get(pk=organization.pk)

    assert type(found) is Organization and found.members == 1
    assert {name: getattr(found, name) for name in concrete_attnames(Organization)} == {
        name: getattr(expected, name) for name in concrete_attnames(Organization)
    }
    assert found._state.adding is False and found._state.db == "default"
    assert compiled.instances(Organization, organization=uuid.uuid4()) == []
